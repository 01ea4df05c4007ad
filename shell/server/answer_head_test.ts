// Issue 33.11: what of the backend's head a client gets, through a real
// server and sockets with a scripted worker: a one-frame answer keeps its
// content-length, headers the backend's `Connection` names stay at the relay,
// and a status HTTP has no final meaning for is the relay's 502 with the
// relay's body, never the backend's.
import assert from "node:assert/strict";
import {
  chatBody,
  type Frame,
  postChat,
  startTestServer,
  testConfig,
  type TestServer,
  type TestWorker,
  withRegisteredWorker,
} from "./_test_helpers.ts";

const BODY = '{"id":"x","object":"chat.completion","choices":[]}';

/** A chat the worker answers whole: the client's response, its body unread. */
async function answeredWhole(
  server: TestServer,
  w: TestWorker,
  status: number,
  body: string,
  headers: Record<string, string>,
): Promise<Response> {
  const pending = postChat(server, chatBody("m1"));
  w.complete(await w.next("request"), status, body, headers);
  return await pending;
}

/**
 * A streamed chat whose request the worker answers with `answer`: the
 * client's response (its body unread) and the request frame.
 */
async function answeredStreamed(
  server: TestServer,
  w: TestWorker,
  answer: (req: Frame) => void,
): Promise<{ res: Response; req: Frame }> {
  const pending = postChat(server, chatBody("m1", true));
  const req = await w.next("request");
  answer(req);
  return { res: await pending, req };
}

/** The worker's stream-head-v1 head for `req`. */
function sendHead(
  w: TestWorker,
  req: Frame,
  status: number,
  headers: Record<string, string>,
): void {
  w.send({
    type: "response_head",
    request_id: req.request_id,
    status_code: status,
    headers,
  });
}

Deno.test("issue 33.11 a one-frame answer keeps the backend's content-length (it went out chunked)", async () => {
  await withRegisteredWorker(
    startTestServer(testConfig()),
    {},
    async (server, w) => {
      const res = await answeredWhole(server, w, 200, BODY, {
        "content-type": "application/json",
        "content-length": String(BODY.length),
      });
      assert.equal(res.headers.get("content-length"), String(BODY.length));
      assert.equal(res.headers.get("transfer-encoding"), null);
      assert.equal(await res.text(), BODY);
    },
  );
});

Deno.test("issue 33.11 headers the backend's Connection header names do not reach the client, in a whole answer and in a stream's head", async () => {
  await withRegisteredWorker(
    startTestServer(testConfig()),
    { extensions: ["stream-head-v1"] },
    async (server, w) => {
      const hop = {
        connection: "keep-alive, X-Hop-Secret , x-other-hop",
        "x-hop-secret": "backend-internal",
        "X-Other-Hop": "2",
        "x-kept": "yes",
      };
      const res = await answeredWhole(server, w, 200, BODY, {
        "content-type": "application/json",
        ...hop,
      });
      await res.body?.cancel();
      assert.equal(res.headers.get("x-kept"), "yes");
      assert.equal(res.headers.get("x-hop-secret"), null);
      assert.equal(res.headers.get("x-other-hop"), null);

      const { res: sres } = await answeredStreamed(server, w, (sreq) => {
        sendHead(w, sreq, 200, {
          "content-type": "application/x-ndjson",
          ...hop,
        });
        w.send({
          type: "response_chunk",
          request_id: sreq.request_id,
          chunk: "{}\n",
        });
        w.complete(sreq, 200, "");
      });
      assert.equal(await sres.text(), "{}\n");
      assert.equal(sres.headers.get("x-kept"), "yes");
      assert.equal(sres.headers.get("x-hop-secret"), null);
      assert.equal(sres.headers.get("x-other-hop"), null);
    },
  );
});

Deno.test("issue 33.11 a backend status of 600 is the relay's 502 backend_protocol_error with the relay's body, whole or as a stream's head (whose worker gets a cancel)", async () => {
  await withRegisteredWorker(
    startTestServer(testConfig()),
    { extensions: ["stream-head-v1"] },
    async (server, w) => {
      const res = await answeredWhole(server, w, 600, "backend secrets", {
        "content-type": "text/plain",
      });
      const body = await res.json();
      assert.equal(res.status, 502);
      assert.equal(body.error.code, "backend_protocol_error");
      assert.match(body.error.message, /status 600/);

      const { res: sres, req: sreq } = await answeredStreamed(
        server,
        w,
        (sreq) => sendHead(w, sreq, 600, { "content-type": "text/plain" }),
      );
      const sbody = await sres.json();
      assert.equal(sres.status, 502);
      assert.equal(sbody.error.code, "backend_protocol_error");
      const cancel = await w.next("cancel");
      assert.equal(cancel.request_id, sreq.request_id);
      w.complete(sreq, 499, "");
    },
  );
});
