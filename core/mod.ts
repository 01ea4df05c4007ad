// The only import surface of the core for shell/, sim/ and bench/.
export { reduce, type Reduced } from "./reduce.ts";
export {
  type Config,
  DEFAULT_CONFIG,
  type KeyRef,
  makeConfig,
  MODEL_LOAD_MS_MAX,
  noTenantLimits,
  type ProviderConfig,
  type RateLimit,
  type TenantLimits,
  type TokenLimit,
} from "./config.ts";
export type {
  ChunkData,
  ClientApi,
  Event,
  EventKind,
  Headers,
  Priority,
  RequestId,
  WorkerId,
} from "./events/event.ts";
export type {
  CacheReport,
  ClientError,
  Effect,
  EffectKind,
  LifecycleReplyKind,
  LogLevel,
  ModelLoadReason,
  Outcome,
  TokenUsage,
} from "./effect.ts";
export {
  initialState,
  type ModelTimes,
  type Request,
  type Residency,
  type State,
  type Worker,
} from "./state/state.ts";
/** Issue 30: which models each worker holds, for views and the simulator. */
export {
  fleetResidency,
  inFlightFor,
  type ModelResidency,
  residencyOf,
} from "./state/residency.ts";
export { eventFromBinaryFrame, eventFromFrame } from "./events/from_frame.ts";
export { effectiveLoad, WILDCARD_MODEL } from "./state/workers.ts";
export { aliasTarget } from "./state/aliases.ts";
export { type TokenAsk, tokenAskOf } from "./state/usage.ts";
export * from "./queries.ts";
export type {
  LifecyclePart,
  LifecycleStatus,
  LifecycleTaskView,
} from "./vocabulary.ts";
export {
  lifecycleTaskView,
  type ModelStatus,
  modelStatuses,
} from "./state/lifecycle.ts";
export { type AuthFailures, throttledForSecs } from "./state/auth_failures.ts";
export * from "./protocol/mod.ts";
export * from "./views/mod.ts";
export { VERSION } from "./version.ts";
