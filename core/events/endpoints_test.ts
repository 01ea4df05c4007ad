// Issue 25: which workers may take a request (model, path prefix, body kind),
// the protocol fields that say it (endpoint_prefixes, method, body_base64), and
// the answers when nobody can.
import assert from "node:assert/strict";
import { EXTENSION_BODY_BYTES } from "../protocol/messages.ts";
import {
  addRequest,
  addWorker,
  clientGone,
  complete,
  disconnect,
  dispatched,
  newState,
  ofKind,
  queued,
  requestEvent,
  routed,
  sent,
  step,
} from "../_testing.ts";
import { modelById, modelList } from "../views/models.ts";
import { aliasTarget } from "../state/aliases.ts";
import type { State } from "../state/state.ts";

Deno.test("register_ack echoes endpoint_prefixes only to a worker that sent them", () => {
  const s = newState();
  const a = addWorker(s, "a", { endpointPrefixes: [" /v1/embeddings", ""] });
  assert.deepEqual(sent(a, "register_ack")[0]!.endpoint_prefixes, [
    "/v1/embeddings",
  ]);
  const b = addWorker(s, "b");
  assert.deepEqual("endpoint_prefixes" in sent(b, "register_ack")[0]!, false);
});

Deno.test("a request goes only to a worker whose prefixes match its path, also from the queue", () => {
  const s = newState();
  addWorker(s, "chat", {
    endpointPrefixes: ["/v1/chat/"],
    maxConcurrent: 1,
  });
  addWorker(s, "emb", {
    endpointPrefixes: ["/v1/embeddings"],
    maxConcurrent: 1,
  });
  assert.deepEqual(
    routed(s, "r1", { endpointPath: "/v1/embeddings" }),
    [["r1", "emb"]],
  );
  assert.deepEqual(routed(s, "r2"), [["r2", "chat"]]);
  // Both busy: the next embeddings request waits for "emb", not "chat".
  assert.deepEqual(routed(s, "r3", { endpointPath: "/v1/embeddings" }), []);
  assert.deepEqual(dispatched(complete(s, "chat", "r2")), []);
  assert.deepEqual(queued(s), ["r3"]);
  assert.deepEqual(dispatched(complete(s, "emb", "r1")), [["r3", "emb"]]);
});

Deno.test("a queued request for a path does not hold back a later one another free worker takes", () => {
  const s = newState();
  addWorker(s, "emb", {
    endpointPrefixes: ["/v1/embeddings"],
    maxConcurrent: 1,
  });
  addWorker(s, "chat", { endpointPrefixes: ["/v1/chat/"], maxConcurrent: 1 });
  addRequest(s, "r1", { endpointPath: "/v1/embeddings" });
  addRequest(s, "r2", { endpointPath: "/v1/embeddings" });
  assert.deepEqual(queued(s), ["r2"]);
  assert.deepEqual(routed(s, "r3"), [["r3", "chat"]]);
});

Deno.test("no connected worker serving the model takes the path: 404 as for an unknown model", () => {
  const s = newState();
  addWorker(s, "chat", { endpointPrefixes: ["/v1/chat/"] });
  const e = addRequest(s, "r1", { endpointPath: "/v1/embeddings" });
  const [err] = ofKind(e, "respondError");
  assert.deepEqual(err!.error.status, 404);
  assert.deepEqual(err!.error.code, "model_not_found");
});

/** r1 at time 0: an audio upload whose body is not text (base64 on the wire). */
function binaryRequest(s: State) {
  return {
    ...requestEvent(s, "r1", {
      atMs: 0,
      endpointPath: "/v1/audio/transcriptions",
      body: "AAEC/w==",
    }),
    bodyBase64: true,
  };
}

Deno.test("a body that is not text goes only to a worker with body-bytes-v1, as body_base64", () => {
  const s = newState();
  addWorker(s, "old", { maxConcurrent: 8 });
  addWorker(s, "new", { extensions: [EXTENSION_BODY_BYTES], maxConcurrent: 1 });
  const e = step(s, { ...binaryRequest(s), method: "POST" });
  const [frame] = sent(e, "request");
  assert.deepEqual(frame!.to, "new");
  assert.deepEqual(frame!.body, "");
  assert.deepEqual(frame!.body_base64, "AAEC/w==");
  assert.deepEqual(frame!.method, "POST");
});

Deno.test("a body that is not text with only original-dialect workers: 501 binary_body_unsupported", () => {
  const s = newState();
  addWorker(s, "old");
  const e = step(s, binaryRequest(s));
  const [err] = ofKind(e, "respondError");
  assert.deepEqual(err!.error.status, 501);
  assert.deepEqual(err!.error.code, "binary_body_unsupported");
});

Deno.test("every request frame carries method; GET stays GET", () => {
  const s = newState();
  addWorker(s, "a");
  const e = step(s, {
    ...requestEvent(s, "r1", { endpointPath: "/v1/files", body: "" }),
    method: "GET",
  });
  assert.deepEqual(sent(e, "request")[0]!.method, "GET");
  assert.deepEqual(sent(addRequest(s, "r2"), "request")[0]!.method, "POST");
});

Deno.test("a binary answer's base64 reaches the respond effect", () => {
  const s = newState();
  addWorker(s, "a", { extensions: [EXTENSION_BODY_BYTES] });
  addRequest(s, "r1");
  const e = step(s, {
    kind: "completeReceived",
    atMs: 0,
    workerId: "a",
    requestId: "r1",
    statusCode: 200,
    headers: { "content-type": "audio/mpeg" },
    body: "",
    tokenCounts: null,
    bodyBase64: "//79",
  });
  assert.deepEqual(ofKind(e, "respond")[0]!.bodyBase64, "//79");
});

Deno.test("aliases: routed as the target, listed beside it, found by id", () => {
  const s = newState({ modelAliases: { "gpt-4o-mini": "m", "x": "absent" } });
  addWorker(s, "a");
  assert.deepEqual(aliasTarget(s.config, "gpt-4o-mini"), "m");
  assert.deepEqual(aliasTarget(s.config, "m"), "m");
  const ids = (modelList(s).data as { id: string }[]).map((o) => o.id);
  assert.deepEqual(ids, ["m", "gpt-4o-mini"]);
  assert.deepEqual(modelById(s, "gpt-4o-mini")?.alias_of, "m");
  assert.deepEqual(modelById(s, "x"), null);
  assert.deepEqual(modelById(s, "m")?.object, "model");
});

Deno.test("a forwarded path is requeued before its first byte only to another worker that takes it, and cancelled when its client leaves", () => {
  const s = newState();
  addWorker(s, "emb1", { endpointPrefixes: ["/v1/embeddings"] });
  addWorker(s, "chat", { endpointPrefixes: ["/v1/chat/"] });
  assert.deepEqual(
    routed(s, "r1", { endpointPath: "/v1/embeddings" }),
    [["r1", "emb1"]],
  );
  // Its worker dies before the first byte: the request waits for a worker
  // that takes the path; the chat worker, though free, does not get it.
  assert.deepEqual(dispatched(disconnect(s, "emb1")), []);
  assert.deepEqual(queued(s), ["r1"]);
  assert.deepEqual(
    dispatched(addWorker(s, "emb2", { endpointPrefixes: ["/v1/embeddings"] })),
    [["r1", "emb2"]],
  );
  const gone = clientGone(s, "r1");
  assert.deepEqual(sent(gone, "cancel", "emb2").map((m) => m.request_id), [
    "r1",
  ]);
});
