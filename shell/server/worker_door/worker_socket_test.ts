// Worker admission at the socket (issue 15): real handshakes on loopback.
import assert from "node:assert/strict";
import {
  clientFrame,
  closeCodeIn,
  rawConnect,
  until,
  upgradeRequest,
} from "../_raw_socket.ts";
import {
  connectWorker,
  registeredWorker,
  SECRET,
  startTestServer,
  testConfig,
  type TestServer,
  withTestServer,
} from "../_test_helpers.ts";
import { parseTrustedProxies } from "../http/client_address.ts";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Event } from "../../../core/mod.ts";
import { makeWorkerUpgrade, PRE_REGISTER_BYTES_MAX } from "./worker_socket.ts";
import { nodeUpgrade } from "./node_upgrade.ts";

async function badAttempt(
  server: TestServer,
  headers: Record<string, string> = {},
): Promise<CloseEvent> {
  const ws = new WebSocket(`${server.wsUrl}?provider=local`, {
    headers: { "x-worker-secret": "wrong", ...headers },
  } as unknown as string[]);
  return await new Promise((r) => ws.addEventListener("close", (e) => r(e)));
}

Deno.test("issue 15 strangers cannot lock out a worker: 12 bad handshakes from its address, then it registers at once", async () => {
  await withTestServer(testConfig(), async (server) => {
    for (let i = 0; i < 12; i++) {
      const closed = await badAttempt(server);
      // What an original worker sees is unchanged: close 1008 with a reason.
      assert.equal(closed.code, 1008);
      assert.match(
        closed.reason,
        i < 10 ? /invalid worker secret/ : /too many failed attempts/,
      );
    }
    const started = performance.now();
    const w = await registeredWorker(server);
    assert.ok(performance.now() - started < 1000);
    assert.equal(typeof w.ack.worker_id, "string");
    await w.close();
  });
});

Deno.test("issue 15 failures are counted per X-Forwarded-For client only when the peer is in TRUSTED_PROXIES", async () => {
  for (
    const [trusted, expect] of [["127.0.0.1", /invalid/], ["", /too many/]]
  ) {
    const server = await startTestServer(
      testConfig({ authFailuresMax: 2 }, {
        trustedProxies: parseTrustedProxies(trusted as string),
      }),
    );
    try {
      await badAttempt(server, { "x-forwarded-for": "198.51.100.1" });
      await badAttempt(server, { "x-forwarded-for": "198.51.100.1" });
      const other = await badAttempt(server, {
        "x-forwarded-for": "198.51.100.2",
      });
      assert.match(other.reason, expect as RegExp, `trusted: "${trusted}"`);
    } finally {
      await server.close();
    }
  }
});

Deno.test("issue 15 a refused handshake is closed at once even if the peer never answers the close frame", async () => {
  const server = await startTestServer();
  const c = await rawConnect(server.port);
  try {
    await c.write(upgradeRequest({ "x-worker-secret": "wrong" }));
    const got = await until(c, (r) => closeCodeIn(r) !== null);
    assert.match(got, /^HTTP\/1\.1 101/);
    assert.equal(closeCodeIn(got), 1008);
    // We never send our close frame; the server ends the socket by itself,
    // well before its old 2 s close timeout.
    const elapsed = await c.ended;
    assert.ok(elapsed < 1500, `closed after ${elapsed} ms`);
  } finally {
    c.close();
    await server.close();
  }
});

Deno.test("issue 15 before register is accepted, more than a register's worth of bytes closes the socket (1009)", async () => {
  const server = await startTestServer();
  const c = await rawConnect(server.port);
  try {
    await c.write(upgradeRequest({ "x-worker-secret": SECRET }));
    await until(c, (r) => r.includes("\r\n\r\n"));
    // A frame that claims 32 MiB and never ends: the old server buffered it.
    const part = new Uint8Array(PRE_REGISTER_BYTES_MAX + 1024).fill(0x20);
    await c.write(clientFrame(1, part, 32 * 1024 * 1024));
    const got = await until(c, (r) => closeCodeIn(r) !== null);
    assert.equal(closeCodeIn(got), 1009);
    const elapsed = await c.ended;
    assert.ok(elapsed < 3000, `closed after ${elapsed} ms`);
    // A registered worker may still send large frames.
    const w = await registeredWorker(server);
    w.send({ type: "pong", current_load: 0, pad: "x".repeat(512 * 1024) });
    w.send({ type: "pong", current_load: 0 });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(w.ws.readyState, WebSocket.OPEN);
    await w.close();
  } finally {
    c.close();
    await server.close();
  }
});

Deno.test("issue 15 an admitted handshake that never sends register is closed after the register timeout", async () => {
  await withTestServer(
    testConfig({ registerTimeoutMs: 300 }),
    async (server) => {
      const w = await connectWorker(server);
      const closed = await w.closed;
      assert.equal(closed.code, 1002);
      assert.match(closed.reason, /no register message/);
    },
  );
});

/** A worker door whose core never answers (a cluster instance whose log went away). */
async function silentDoor(answerTimeoutMs: number) {
  const events: Event[] = [];
  const upgrade = makeWorkerUpgrade({
    sockets: new Map(),
    submit: (e) => events.push(e),
    now: () => 0,
    workerSecret: SECRET,
    defaultProvider: "local",
    frameCharsMax: 1024,
    isRegistered: () => false,
    answerTimeoutMs,
  });
  const http = createServer();
  http.on("upgrade", (req, socket, head) =>
    upgrade.onUpgrade(
      nodeUpgrade(req, socket, head, {
        trustedProxies: parseTrustedProxies(""),
      }),
    ));
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", () => r()));
  return {
    events,
    upgrade,
    port: (http.address() as AddressInfo).port,
    close: async () => {
      upgrade.close();
      await new Promise((r) => http.close(r));
    },
  };
}

Deno.test("issue 23 a worker handshake the core never answers is refused with 1013 (retry soon) after the answer timeout, and the core is told it is gone", async () => {
  const door = await silentDoor(300);
  const c = await rawConnect(door.port);
  try {
    const started = performance.now();
    await c.write(upgradeRequest({ "x-worker-secret": SECRET }));
    await waitFor(() => door.upgrade.admission.pendingIds().length === 1);
    const got = await until(c, (r) => closeCodeIn(r) !== null);
    assert.equal(closeCodeIn(got), 1013);
    assert.match(got, /did not answer in time/);
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 250 && elapsed < 3_000, `refused after ${elapsed} ms`);
    // The server ends its side: nothing is left half-open (CLOSE-WAIT).
    await c.ended;
    assert.deepEqual(door.upgrade.admission.pendingIds(), []);
    assert.deepEqual(door.events.map((e) => e.kind), [
      "workerConnectAttempted",
      "workerDisconnected",
    ]);
  } finally {
    c.close();
    await door.close();
  }
});

Deno.test("issue 23 pending handshakes are listed and each can be refused by the runtime (a cluster instance cut off from its log)", async () => {
  const door = await silentDoor(60_000);
  const a = await rawConnect(door.port);
  const b = await rawConnect(door.port);
  try {
    await a.write(upgradeRequest({ "x-worker-secret": SECRET }));
    await b.write(upgradeRequest({ "x-worker-secret": SECRET }));
    await waitFor(() => door.upgrade.admission.pendingIds().length === 2);
    for (const id of door.upgrade.admission.pendingIds()) {
      assert.ok(door.upgrade.admission.refuse(id, 1013, "log unreachable"));
    }
    for (const c of [a, b]) {
      assert.equal(
        closeCodeIn(await until(c, (r) => closeCodeIn(r) !== null)),
        1013,
      );
      await c.ended;
    }
    assert.deepEqual(door.upgrade.admission.pendingIds(), []);
  } finally {
    a.close();
    b.close();
    await door.close();
  }
});

async function waitFor(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}
