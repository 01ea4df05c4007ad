// C33: any text from a worker goes through core's decoder and reducer without a
// throw; an invalid frame closes that worker with 1002 and touches nothing else.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  encodeFrame,
  eventFromFrame,
  initialState,
  makeConfig,
  reduce,
} from "../../core/mod.ts";
import { garbageFrame } from "../virtual_worker.ts";

function registered() {
  const state = initialState(makeConfig({ frameCharsMax: 200 }));
  reduce(state, {
    kind: "workerConnectAttempted",
    atMs: 0,
    workerId: "w.1",
    provider: "local",
    clientIp: "10.0.0.1",
    secretValid: true,
  });
  reduce(
    state,
    eventFromFrame(
      "w.1",
      1,
      encodeFrame({
        type: "register",
        worker_name: "w",
        models: ["m1"],
        max_concurrent: 2,
        protocol_version: "1",
        current_load: 0,
      }),
      200,
    ),
  );
  return state;
}

Deno.test("property C33: arbitrary frame text never throws; invalid frames close the worker", () => {
  const frame = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc.json({ maxDepth: 2 }),
    fc.nat(9).map((v) => garbageFrame(v, 200)),
    fc.record({
      type: fc.constantFrom("pong", "response_chunk", "error", "models_update"),
      request_id: fc.string(),
    })
      .map((o) => JSON.stringify(o)),
  );
  const out = fc.check(
    fc.property(frame, (text) => {
      const state = registered();
      const event = eventFromFrame("w.1", 5, text, 200);
      const { effects } = reduce(state, event);
      if (event.kind === "workerFrameInvalid") {
        return effects.some((f) =>
          f.kind === "closeWorker" && f.code === 1002
        ) && !state.workers.has("w.1");
      }
      return true;
    }),
    { seed: 33, numRuns: 500 },
  );
  assert.equal(
    out.failed,
    false,
    `counterexample ${
      JSON.stringify(out.counterexample)
    } path ${out.counterexamplePath}`,
  );
});
