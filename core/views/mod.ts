// Read-only documents built from state for the shell's GET routes: each a pure
// function of state (and of what the shell alone knows: version, uptime, waits).
export { capabilitiesView, type WaitStats } from "./capabilities.ts";
export {
  type ClusterHealth,
  type FleetHealth,
  fleetHealth,
  type HealthAnswer,
  healthAnswer,
  queueSaturated,
} from "./health.ts";
export { type LifecycleAnswer, lifecycleAnswer } from "./lifecycle_reply.ts";
export { taskDocument } from "./lifecycle_task.ts";
export { modelById, modelList } from "./models.ts";
