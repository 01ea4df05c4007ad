import assert from "node:assert/strict";
import { type RawConn, rawConnect } from "../_raw_socket.ts";
import {
  registeredWorker,
  startTestServer,
  testConfig,
  waitFor,
} from "../_test_helpers.ts";
import { defaultMaxConnections, openFileLimit } from "./connection_cap.ts";

Deno.test("issue 15 beyond MAX_CONNECTIONS a new connection gets 503 with Retry-After and is closed; workers with the secret still get in", async () => {
  const server = await startTestServer(testConfig({}, { maxConnections: 2 }));
  const idle: RawConn[] = [];
  try {
    for (let i = 0; i < 2; i++) idle.push(await rawConnect(server.port));
    const c = await rawConnect(server.port);
    await c.write(
      "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    );
    await c.ended;
    const got = c.received();
    assert.match(got, /^HTTP\/1\.1 503/);
    assert.match(got, /retry-after: 1/i);
    assert.match(got, /"type":"error"/); // /v1/messages: Anthropic's shape
    assert.match(got, /MAX_CONNECTIONS/);
    c.close();
    // An authenticated worker is not held back by a crowd of clients.
    const w = await registeredWorker(server);
    // Once the crowd leaves, clients are served again.
    for (const s of idle) s.close();
    await waitFor("the idle sockets to be gone", async () => {
      const r = await fetch(`${server.url}/health`, {
        headers: { connection: "close" },
      });
      const text = await r.text();
      return r.status === 200 && !text.includes("too_many_connections");
    });
    await w.close();
  } finally {
    for (const s of idle) s.close();
    await server.close();
  }
});

Deno.test("issue 15 MAX_CONNECTIONS=auto is 80% of the open-file limit", () => {
  const limit = openFileLimit();
  if (limit === null) assert.equal(defaultMaxConnections(), 1024);
  else assert.equal(defaultMaxConnections(), Math.floor(limit * 0.8));
});

Deno.test("issue 15 an over-cap connection that sends nothing is not kept", async () => {
  const server = await startTestServer(testConfig({}, { maxConnections: 1 }));
  const first = await rawConnect(server.port);
  const second = await rawConnect(server.port);
  try {
    const ms = await second.ended;
    assert.ok(ms < 4000, `${ms} ms`);
  } finally {
    first.close();
    second.close();
    await server.close();
  }
});
