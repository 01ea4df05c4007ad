// Issue 30: the model residency metrics, fed by the core's effects.
import { initialState, makeConfig } from "../../../core/mod.ts";
import type { Effect } from "../../../core/mod.ts";
import { Metrics } from "./metrics.ts";
import { assertLines } from "./_exposition.ts";

const started = (model: string, worker: string): Effect => ({
  kind: "modelLoadStarted",
  workerId: `id-${worker}`,
  workerName: worker,
  model,
  triggeredBy: "r1",
  reason: "demand",
  evicting: null,
});

Deno.test("loads by model, worker and reason; evictions by model and worker; load seconds as a histogram", () => {
  const m = new Metrics(0);
  m.onEffect(started("a", "box-1"));
  m.onEffect(started("a", "box-1"));
  m.onEffect({
    kind: "modelLoadStarted",
    workerId: "id-box-2",
    workerName: "box-2",
    model: "b",
    triggeredBy: null,
    reason: "reported",
    evicting: null,
  });
  m.onEffect({
    kind: "modelEvicted",
    workerId: "id-box-1",
    workerName: "box-1",
    model: "a",
  });
  m.onEffect({
    kind: "modelLoadFinished",
    workerId: "id-box-1",
    workerName: "box-1",
    model: "a",
    loadMs: 7_000,
  });
  // A load whose start the relay did not see has no duration to count.
  m.onEffect({
    kind: "modelLoadFinished",
    workerId: "id-box-2",
    workerName: "box-2",
    model: "b",
    loadMs: null,
  });
  const text = m.prometheus(initialState(makeConfig({}), 0), 0);
  assertLines(text, [
    'modelrelay_model_loads_total{model="a",worker="box-1",reason="demand"} 2',
    'modelrelay_model_loads_total{model="b",worker="box-2",reason="reported"} 1',
    'modelrelay_model_evictions_total{model="a",worker="box-1"} 1',
    "modelrelay_model_load_seconds_count 1",
    "modelrelay_model_load_seconds_sum 7",
    'modelrelay_model_load_seconds_bucket{le="5"} 0',
    'modelrelay_model_load_seconds_bucket{le="10"} 1',
  ]);
});
