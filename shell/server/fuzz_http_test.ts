// The client door under fuzz (issue 15): random and malformed HTTP requests at
// a running relay. Every request gets a well-formed answer in its route's error
// shape, or a clean close; the relay logs no error, the legit stream running
// alongside is unchanged to the byte, and /health and a normal request still
// succeed afterwards. `deno task fuzz` runs many more cases (FUZZ_RUNS).
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type FetchCase,
  fuzzRuns,
  fuzzSeed,
  httpCase,
  type RawCase,
} from "./_fuzz_gen.ts";
import { FUZZ_MAX_BODY, startFuzzRelay } from "./_fuzz_harness.ts";
import { rawConnect } from "./_raw_socket.ts";

const CI_RUNS = 2000;

function checkShape(
  c: FetchCase,
  status: number,
  type: string,
  text: string,
): void {
  assert.ok(status >= 100 && status <= 599, `status ${status}`);
  const path = new URL("http://x" + c.path).pathname;
  if (status < 400 || c.method === "HEAD" || path === "/health") return;
  assert.match(type, /application\/json/, `${status} ${path}: ${text}`);
  const body = JSON.parse(text);
  if (path === "/v1/messages") {
    assert.equal(body.type, "error", text);
    assert.equal(typeof body.error?.type, "string", text);
  }
  assert.equal(typeof body.error?.message, "string", text);
}

async function sendFetch(base: string, c: FetchCase): Promise<void> {
  const noBody = c.method === "GET" || c.method === "HEAD";
  let res: Response;
  try {
    res = await fetch(base + c.path, {
      method: c.method,
      headers: c.headers,
      ...(noBody ? {} : { body: c.body as Uint8Array<ArrayBuffer> }),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (e) {
    // The relay may close an oversized upload before it is all sent: a close,
    // after its 413, is the allowed outcome then.
    if (c.body.length > FUZZ_MAX_BODY) return;
    throw e;
  }
  const text = await res.text();
  checkShape(c, res.status, res.headers.get("content-type") ?? "", text);
}

async function sendRaw(port: number, c: RawCase): Promise<void> {
  const conn = await rawConnect(port);
  try {
    await conn.write(c.bytes).catch(() => {});
    await conn.conn.closeWrite().catch(() => {});
    const ms = await Promise.race([
      conn.ended,
      new Promise<number>((r) => setTimeout(() => r(-1), 10_000)),
    ]);
    assert.notEqual(ms, -1, "the relay neither answered nor closed");
    const got = conn.received();
    if (got !== "") {
      assert.match(got, /^HTTP\/1\.[01] [1-5]\d\d /, got.slice(0, 80));
    }
  } finally {
    conn.close();
  }
}

Deno.test("issue 15 fuzz: random HTTP requests get a well-formed answer or a clean close, and no other client is affected", async () => {
  const h = await startFuzzRelay();
  try {
    await fc.assert(
      fc.asyncProperty(httpCase(FUZZ_MAX_BODY), async (c) => {
        if (c.kind === "fetch") await sendFetch(h.relay.url, c);
        else await sendRaw(h.relay.port, c);
        await h.step();
        assert.deepEqual(h.errors, []);
      }),
      { numRuns: fuzzRuns(CI_RUNS), seed: fuzzSeed() },
    );
    await h.finish();
  } finally {
    await h.close();
  }
});

Deno.test("issue 15 regression found by the fuzz: a request target of // is a 404, not an exception (client and worker routes)", async () => {
  const h = await startFuzzRelay();
  try {
    for (const target of ["//", "//..", "//x/v1/worker/connect"]) {
      const c = await rawConnect(h.relay.port);
      await c.write(
        `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      await c.ended;
      assert.match(c.received(), /^HTTP\/1\.1 404/, target);
      c.close();
      const u = await rawConnect(h.relay.port);
      await u.write(
        `GET ${target} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
      await u.ended;
      assert.match(u.received(), /^HTTP\/1\.1 404/, target);
      u.close();
      await h.step();
    }
    await h.finish();
  } finally {
    await h.close();
  }
});
