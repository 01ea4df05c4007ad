// Issue 33.11: what of the backend's head a client gets, through a real
// server and sockets with a scripted worker: a one-frame answer keeps its
// content-length, headers the backend's `Connection` names stay at the relay,
// and a status HTTP has no final meaning for is the relay's 502 with the
// relay's body, never the backend's.
import assert from "node:assert/strict";
import {
  chatBody,
  postChat,
  registeredWorker,
  startTestServer,
  testConfig,
} from "./_test_helpers.ts";

const BODY = '{"id":"x","object":"chat.completion","choices":[]}';

Deno.test("issue 33.11 a one-frame answer keeps the backend's content-length (it went out chunked)", async () => {
  const server = await startTestServer(testConfig());
  const w = await registeredWorker(server);
  try {
    const pending = postChat(server, chatBody("m1"));
    const req = await w.next("request");
    w.complete(req, 200, BODY, {
      "content-type": "application/json",
      "content-length": String(BODY.length),
    });
    const res = await pending;
    assert.equal(res.headers.get("content-length"), String(BODY.length));
    assert.equal(res.headers.get("transfer-encoding"), null);
    assert.equal(await res.text(), BODY);
  } finally {
    await w.close();
    await server.close();
  }
});

Deno.test("issue 33.11 headers the backend's Connection header names do not reach the client, in a whole answer and in a stream's head", async () => {
  const server = await startTestServer(testConfig());
  const w = await registeredWorker(server, { extensions: ["stream-head-v1"] });
  try {
    const hop = {
      connection: "keep-alive, X-Hop-Secret , x-other-hop",
      "x-hop-secret": "backend-internal",
      "X-Other-Hop": "2",
      "x-kept": "yes",
    };
    const whole = postChat(server, chatBody("m1"));
    const req = await w.next("request");
    w.complete(req, 200, BODY, { "content-type": "application/json", ...hop });
    const res = await whole;
    await res.body?.cancel();
    assert.equal(res.headers.get("x-kept"), "yes");
    assert.equal(res.headers.get("x-hop-secret"), null);
    assert.equal(res.headers.get("x-other-hop"), null);

    const streamed = postChat(server, chatBody("m1", true));
    const sreq = await w.next("request");
    w.send({
      type: "response_head",
      request_id: sreq.request_id,
      status_code: 200,
      headers: { "content-type": "application/x-ndjson", ...hop },
    });
    w.send({
      type: "response_chunk",
      request_id: sreq.request_id,
      chunk: "{}\n",
    });
    w.complete(sreq, 200, "");
    const sres = await streamed;
    assert.equal(await sres.text(), "{}\n");
    assert.equal(sres.headers.get("x-kept"), "yes");
    assert.equal(sres.headers.get("x-hop-secret"), null);
    assert.equal(sres.headers.get("x-other-hop"), null);
  } finally {
    await w.close();
    await server.close();
  }
});

Deno.test("issue 33.11 a backend status of 600 is the relay's 502 backend_protocol_error with the relay's body, whole or as a stream's head (whose worker gets a cancel)", async () => {
  const server = await startTestServer(testConfig());
  const w = await registeredWorker(server, { extensions: ["stream-head-v1"] });
  try {
    const whole = postChat(server, chatBody("m1"));
    const req = await w.next("request");
    w.complete(req, 600, "backend secrets", { "content-type": "text/plain" });
    const res = await whole;
    const body = await res.json();
    assert.equal(res.status, 502);
    assert.equal(body.error.code, "backend_protocol_error");
    assert.match(body.error.message, /status 600/);

    const streamed = postChat(server, chatBody("m1", true));
    const sreq = await w.next("request");
    w.send({
      type: "response_head",
      request_id: sreq.request_id,
      status_code: 600,
      headers: { "content-type": "text/plain" },
    });
    const sres = await streamed;
    const sbody = await sres.json();
    assert.equal(sres.status, 502);
    assert.equal(sbody.error.code, "backend_protocol_error");
    const cancel = await w.next("cancel");
    assert.equal(cancel.request_id, sreq.request_id);
    w.complete(sreq, 499, "");
  } finally {
    await w.close();
    await server.close();
  }
});
