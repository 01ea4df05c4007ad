// Issue 30: the residency indexes (hotRoutes, holders) always say what a scan
// of every worker would, whatever happens to the workers.
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  addRequest,
  addWorker,
  complete,
  newState,
  step,
} from "../../core/_testing.ts";
import { EXTENSION_RESIDENCY } from "../../core/protocol/messages.ts";
import { holdersKey } from "../../core/state/hot_routes.ts";
import { bucketEntries } from "../../core/state/load_buckets.ts";
import { residencyOf } from "../../core/state/residency.ts";
import type { State } from "../../core/state/state.ts";

const MODELS = ["a", "b", "c"];

/** What the indexes should hold, from a scan of every worker. */
function scanned(state: State) {
  const hot: string[] = [];
  const holders: string[] = [];
  for (const w of state.workers.values()) {
    if (w.residency === null) continue;
    for (const m of MODELS) {
      const at = residencyOf(w, m);
      if (at !== "available") holders.push(`${m}:${w.id}`);
      if (at === "loaded" && w.routeLevel !== null) {
        hot.push(`${m}:${w.id}@${w.routeLevel}`);
      }
    }
  }
  return { hot: hot.sort(), holders: holders.sort() };
}

function indexed(state: State) {
  const hot: string[] = [];
  for (const [m, b] of state.hotRoutes.get("local") ?? []) {
    for (const [level, id] of bucketEntries(b)) hot.push(`${m}:${id}@${level}`);
  }
  const holders: string[] = [];
  for (const m of MODELS) {
    for (const id of state.holders.get(holdersKey("local", m)) ?? []) {
      holders.push(`${m}:${id}`);
    }
  }
  return { hot: hot.sort(), holders: holders.sort() };
}

const op = fc.oneof(
  fc.record({
    kind: fc.constant("report" as const),
    w: fc.integer({ min: 0, max: 2 }),
    loaded: fc.subarray(MODELS),
    loading: fc.subarray(MODELS),
  }),
  fc.record({
    kind: fc.constant("request" as const),
    model: fc.constantFrom(...MODELS),
  }),
  fc.record({
    kind: fc.constant("complete" as const),
    n: fc.nat(),
  }),
  fc.record({
    kind: fc.constant("drop" as const),
    w: fc.integer({ min: 0, max: 2 }),
  }),
);

Deno.test("property: hotRoutes and holders match a scan of the workers after any reports, dispatches, completions and departures", () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
      const s = newState();
      for (let i = 0; i < 3; i++) {
        addWorker(s, `w${i}`, {
          models: MODELS,
          maxConcurrent: 2,
          extensions: [EXTENSION_RESIDENCY],
        });
      }
      let n = 0;
      for (const o of ops) {
        if (o.kind === "report") {
          if (!s.workers.has(`w${o.w}`)) continue;
          step(s, {
            kind: "residencyReceived",
            atMs: s.nowMs,
            workerId: `w${o.w}`,
            loaded: o.loaded,
            loading: o.loading.filter((m) => !o.loaded.includes(m)),
            room: 2,
          });
        } else if (o.kind === "request") {
          addRequest(s, `r${n++}`, { model: o.model });
        } else if (o.kind === "complete") {
          const open = [...s.requests.values()].filter((r) =>
            r.status.kind !== "queued"
          );
          const r = open[o.n % Math.max(1, open.length)];
          if (r !== undefined && r.status.kind !== "queued") {
            complete(s, r.status.workerId, r.id);
          }
        } else {
          step(s, {
            kind: "workerDisconnected",
            atMs: s.nowMs,
            workerId: `w${o.w}`,
            reason: "gone",
          });
        }
        assert.deepEqual(indexed(s), scanned(s));
        // Parked nodes are kept only for workers still connected (C210).
        for (const byKey of [...s.routes.values(), ...s.hotRoutes.values()]) {
          for (const b of byKey.values()) {
            for (const id of b.nodes.keys()) assert.ok(s.workers.has(id), id);
          }
        }
      }
    }),
    { numRuns: 300 },
  );
});
