import assert from "node:assert/strict";
import { initialState, makeConfig, reduce } from "../../../core/mod.ts";
import { newViewCache, viewAt } from "./lifecycle_http.ts";

function counting() {
  let calls = 0;
  return {
    compute: () => ({ n: ++calls }),
    calls: () => calls,
  };
}

Deno.test("a view is computed once per state version and again after any event", () => {
  const state = initialState(makeConfig({}), 0);
  const cache = newViewCache();
  const c = counting();
  const first = viewAt(cache, state, "fleet:", c.compute);
  assert.equal(viewAt(cache, state, "fleet:", c.compute), first);
  assert.equal(c.calls(), 1);
  // A tick at the same time still moves the version (health reads the time).
  reduce(state, { kind: "tick", atMs: 0, unixMs: 0 });
  assert.notEqual(viewAt(cache, state, "fleet:", c.compute), first);
  assert.equal(c.calls(), 2);
});

Deno.test("each key has its own view, and a missing worker is not kept", () => {
  const state = initialState(makeConfig({}), 0);
  const cache = newViewCache();
  const c = counting();
  viewAt(cache, state, "fleet:", c.compute);
  viewAt(cache, state, "detail:", c.compute);
  assert.equal(c.calls(), 2);
  let misses = 0;
  const missing = () => {
    misses++;
    return null;
  };
  assert.equal(viewAt(cache, state, "detail:w9", missing), null);
  assert.equal(viewAt(cache, state, "detail:w9", missing), null);
  assert.equal(misses, 2);
  assert.equal(cache.bodies.size, 2);
});

Deno.test("a state rebuilt from version 0 (cluster reset) does not reuse a view of another time", () => {
  const state = initialState(makeConfig({}), 0);
  const cache = newViewCache();
  const c = counting();
  reduce(state, { kind: "tick", atMs: 100, unixMs: 0 });
  viewAt(cache, state, "fleet:", c.compute);
  Object.assign(state, initialState(makeConfig({}), 0));
  reduce(state, { kind: "tick", atMs: 50, unixMs: 0 });
  assert.equal(state.version, 1);
  viewAt(cache, state, "fleet:", c.compute);
  assert.equal(c.calls(), 2);
});
