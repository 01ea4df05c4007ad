import assert from "node:assert/strict";
import {
  CAPABILITIES_INTERVAL_MS,
  RESIDENCY_INTERVAL_MS,
  startActions,
  step,
  type WorkerAction,
} from "./mod.ts";
import { fresh, registered, registeredWith } from "./_testing.ts";

const armed = (actions: WorkerAction[]) =>
  actions.flatMap((a) => a.kind === "armTimer" ? [[a.timer, a.ms]] : []);
const kinds = (actions: WorkerAction[]) => actions.map((a) => a.kind);

Deno.test("a starting worker arms the capabilities timer and the models refresh, then dials", () => {
  const s = fresh({ modelsDiscovered: true, modelsRefreshSecs: 30 });
  const actions = startActions(s);
  assert.deepEqual(kinds(actions), [
    "armTimer",
    "armTimer",
    "armTimer",
    "connect",
    "armTimer",
  ]);
  assert.deepEqual(armed(actions), [
    ["capabilities", CAPABILITIES_INTERVAL_MS],
    ["modelsRefresh", 30_000],
    ["residency", RESIDENCY_INTERVAL_MS],
    ["handshake", 15_000],
  ]);
});

Deno.test("configured models, or no refresh interval, arm no models refresh", () => {
  for (
    const s of [
      fresh({ modelsDiscovered: false, modelsRefreshSecs: 30 }),
      fresh({ modelsDiscovered: true, modelsRefreshSecs: 0 }),
      fresh({ modelsDiscovered: true }),
    ]
  ) {
    assert.deepEqual(
      armed(startActions(s)).map(([timer]) => timer),
      ["capabilities", "residency", "handshake"],
    );
  }
});

Deno.test("the capabilities timer probes only a server that takes capabilities, and always re-arms", () => {
  const rearm = { kind: "armTimer", timer: "capabilities", ms: 5_000 };
  const ours = registeredWith(["capabilities-v1"]);
  assert.deepEqual(step(ours, { atMs: 5_000, kind: "capabilitiesDue" }), [
    { kind: "probeCapabilities" },
    rearm,
  ]);
  const original = registered();
  assert.deepEqual(step(original, { atMs: 5_000, kind: "capabilitiesDue" }), [
    rearm,
  ]);
  const offline = fresh();
  assert.deepEqual(step(offline, { atMs: 5_000, kind: "capabilitiesDue" }), [
    rearm,
  ]);
});

Deno.test("the models refresh lists models while registered and not draining, and always re-arms", () => {
  const rearm = { kind: "armTimer", timer: "modelsRefresh", ms: 30_000 };
  const over = { modelsDiscovered: true, modelsRefreshSecs: 30 };
  const up = registered(over);
  assert.deepEqual(step(up, { atMs: 30_000, kind: "modelsRefreshDue" }), [
    { kind: "listModels", reply: false },
    rearm,
  ]);
  const offline = fresh(over);
  assert.deepEqual(step(offline, { atMs: 30_000, kind: "modelsRefreshDue" }), [
    rearm,
  ]);
  step(up, { atMs: 31_000, kind: "shutdownSignalled" });
  assert.deepEqual(
    step(up, { atMs: 60_000, kind: "modelsRefreshDue" }).filter((a) =>
      a.kind === "listModels"
    ),
    [],
  );
});
