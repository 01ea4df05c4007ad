// The named scenarios, runnable one by one: `deno task sim --scenario NAME --seed N`.
import type { Scenario } from "../scenario.ts";
import { crashStorm } from "./crash_storm.ts";
import { drainDuringLoad } from "./drain_during_load.ts";
import { heartbeatLoss } from "./heartbeat_loss.ts";
import { hostileWorker } from "./hostile_worker.ts";
import { massClientAbort } from "./mass_client_abort.ts";
import { lowPriorityBurstUnderHigh } from "./low_priority_burst_under_high.ts";
import { modelLifecycle } from "./model_lifecycle.ts";
import { modelUpdateRace } from "./model_update_race.ts";
import { noisyTenant } from "./noisy_tenant.ts";
import { queueOverflow } from "./queue_overflow.ts";
import { rateLimitedTenants } from "./rate_limited_tenants.ts";
import { realFaults } from "./real_faults.ts";
import { rollingRestart } from "./rolling_restart.ts";
import { steadyLoad } from "./steady_load.ts";
import { workerChurn } from "./worker_churn.ts";

export { type Regression, REGRESSIONS } from "./regressions.ts";

export const SCENARIOS: ReadonlyMap<string, Scenario> = new Map(
  [
    steadyLoad,
    workerChurn,
    crashStorm,
    heartbeatLoss,
    massClientAbort,
    drainDuringLoad,
    queueOverflow,
    modelUpdateRace,
    hostileWorker,
    noisyTenant,
    lowPriorityBurstUnderHigh,
    rateLimitedTenants,
    modelLifecycle,
    realFaults,
    rollingRestart,
  ].map((s) => [s.name, s]),
);
