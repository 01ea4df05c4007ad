import assert from "node:assert/strict";
import { initialState, makeConfig } from "../../../core/mod.ts";
import type { Effect } from "../../../core/mod.ts";
import { LABEL_VALUES_MAX, METRICS, Metrics, OTHER_LABEL } from "./metrics.ts";

function finished(model: string, tenant: string): Effect {
  return {
    kind: "requestFinished",
    requestId: "r",
    route: "openai",
    model,
    tenant,
    outcome: "completed",
    status: 200,
    durationMs: 1,
    queueWaitMs: 0,
    firstByteMs: null,
    requeues: 0,
    cacheReport: null,
    keyId: null,
    keyName: null,
    modelAsked: model,
    modelServed: model,
    workerName: null,
    usage: { prompt: null, completion: null, cached: null, estimated: false },
  };
}

Deno.test("each label kind has its own cap: models past theirs are 'other', tenants keep their room", () => {
  const m = new Metrics(0);
  for (let i = 0; i < LABEL_VALUES_MAX.model + 5; i++) {
    m.onEffect(finished(`m${i}`, "t0"));
  }
  m.onEffect(finished("late-model", "late-tenant"));
  const text = m.prometheus(initialState(makeConfig({}), 0), 0);
  assert.match(text, new RegExp(`model="${OTHER_LABEL}"`));
  assert.doesNotMatch(text, /model="late-model"/);
  assert.match(text, /tenant="late-tenant"/);
  for (let i = 0; i < LABEL_VALUES_MAX.tenant; i++) {
    m.onEffect(finished("m0", `t${i}`));
  }
  const after = m.prometheus(initialState(makeConfig({}), 0), 0);
  assert.match(after, new RegExp(`tenant="${OTHER_LABEL}"`));
});

Deno.test("/metrics prints every row of the metric table once, with its HELP and TYPE, in table order", () => {
  const text = new Metrics(0).prometheus(initialState(makeConfig({}), 0), 0);
  const typed = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((x) =>
    `${x[1]} ${x[2]}`
  );
  assert.deepEqual(typed, METRICS.map((d) => `${d.name} ${d.type}`));
  assert.equal(new Set(METRICS.map((d) => d.name)).size, METRICS.length);
  for (const d of METRICS) {
    assert.match(text, new RegExp(`^# HELP ${d.name} `, "m"));
  }
});

Deno.test("issue 25: routes are capped like models, and counted without their query", () => {
  const m = new Metrics(0);
  const at = (route: string): Effect => ({
    ...(finished("m0", "t0") as Extract<Effect, { kind: "requestFinished" }>),
    route,
  });
  m.onEffect(at("/v1/files?purpose=a"));
  m.onEffect(at("/v1/files?purpose=b"));
  for (let i = 0; i < LABEL_VALUES_MAX.route + 5; i++) {
    m.onEffect(at(`/v1/random-${i}`));
  }
  const text = m.prometheus(initialState(makeConfig({}), 0), 0);
  assert.match(text, /route="\/v1\/files",model="m0",outcome="completed"} 2/);
  assert.doesNotMatch(text, /purpose=/);
  assert.match(text, new RegExp(`route="${OTHER_LABEL}"`));
});
