// Issue 33.3: clients that ask for large non-streaming answers and never read
// them, against real processes (a raw backend per answer size, real workers, a
// real server) and real idle sockets. On main (9ef0db5) three such clients
// made every other client's answer fail 503 response_buffer_full, and after
// REQUEST_TIMEOUT_SECS the budget was given back while the server still held
// the bytes: four rounds of idle holders kept 240 MiB under a 64 MiB budget.
import assert from "node:assert/strict";
import { startBigBodyBackend } from "./_big_body_backend.ts";
import { rssMiB, startServer, startWorker, withChildren } from "./_faults.ts";
import { waitUntil } from "../shell/procs.ts";
import type { Child } from "../shell/procs.ts";
import { postChat } from "./_post_chat.ts";
import { readUntilEnd } from "../shell/server/_raw_socket.ts";

const MIB = 1024 * 1024;
const BIG = 20 * MIB;
const SMALL = 5 * MIB;

/** A server with a 64 MiB budget, a worker whose backend answers 20 MiB ("big") and one answering 5 MiB ("small"). */
async function relay(started: Child[], env: Record<string, string>) {
  const big = await startBigBodyBackend(BIG, "big");
  const small = await startBigBodyBackend(SMALL, "small");
  const url = await startServer(started, {
    LOG_LEVEL: "info",
    MAX_BUFFERED_RESPONSE_BYTES: String(64 * MIB),
    ...env,
  });
  for (const [name, backend] of [["wbig", big], ["wsmall", small]] as const) {
    await startWorker(started, name, url, backend.url, {
      MAX_CONCURRENT: "8",
      LOG_LEVEL: "info",
    });
  }
  const server = started.find((c) => c.name === "server")!;
  return {
    url,
    server,
    close: async () => {
      await big.close();
      await small.close();
    },
  };
}

/** A client that sends its request and never reads a byte of the answer. */
async function idleReader(
  url: string,
  model: string,
  tenant: string,
): Promise<Deno.TcpConn> {
  const port = Number(new URL(url).port);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const body = JSON.stringify({
    model,
    messages: [{ role: "user", content: "a lot" }],
  });
  await conn.write(new TextEncoder().encode(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: relay\r\n` +
      `content-type: application/json\r\nx-tenant-id: ${tenant}\r\n` +
      `content-length: ${body.length}\r\n\r\n${body}`,
  ));
  return conn;
}

/** A client that reads its whole answer: status, size, and the error code if any. */
async function readingClient(
  url: string,
  model: string,
  tenant: string,
): Promise<{ status: number; bytes: number; code: string | null }> {
  const res = await postChat(url, {
    model,
    messages: [{ role: "user", content: "a lot" }],
  }, { headers: { "x-tenant-id": tenant } });
  const bytes = new Uint8Array(await res.arrayBuffer());
  const code = res.status === 200
    ? null
    : JSON.parse(new TextDecoder().decode(bytes)).error.code;
  return { status: res.status, bytes: bytes.length, code };
}

/** Requests of `tenant` that have ended, by the server's metrics. */
async function endedFor(url: string, tenant: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const line of text.split("\n")) {
    if (
      line.startsWith("modelrelay_tenant_requests_total{") &&
      line.includes(`tenant="${tenant}"`)
    ) n += Number(line.split(" ").at(-1));
  }
  return n;
}

Deno.test("issue 33.3 one tenant's clients that never read cannot deny the others: three idle 20 MiB readers under a 64 MiB budget, and another tenant's 5 MiB answers all arrive whole", async () => {
  const idle: Deno.TcpConn[] = [];
  await withChildren(async (started) => {
    // No cut within the test: only the tenant's share protects the others.
    const r = await relay(started, { CLIENT_WRITE_TIMEOUT_SECS: "600" });
    try {
      for (let i = 0; i < 3; i++) {
        idle.push(await idleReader(r.url, "big", "idle"));
      }
      await waitUntil(
        "the three idle readers' requests to end (handed over or refused)",
        async () => (await endedFor(r.url, "idle")) === 3,
        30_000,
        r.server,
      );
      const others = await Promise.all(
        [1, 2, 3].map(() => readingClient(r.url, "small", "busy")),
      );
      assert.deepEqual(
        others,
        [1, 2, 3].map(() => ({ status: 200, bytes: SMALL, code: null })),
      );
    } finally {
      for (const c of idle) c.close();
      await r.close();
    }
  });
});

Deno.test("issue 33.3 clients that never read are cut after CLIENT_WRITE_TIMEOUT_SECS and the bytes held for them are let go: six rounds of three idle 20 MiB readers leave the server's memory within two budgets of where one round left it", async () => {
  const idle: Deno.TcpConn[] = [];
  await withChildren(async (started) => {
    const r = await relay(started, {
      CLIENT_WRITE_TIMEOUT_SECS: "1",
      // Main gave the budget back at the request timeout, bytes still held.
      REQUEST_TIMEOUT_SECS: "10",
    });
    try {
      /** A reading client's 20 MiB answer: only once the idle ones' bytes left the budget. */
      const budgetFree = () =>
        waitUntil(
          "a 20 MiB answer to fit the budget",
          async () =>
            (await readingClient(r.url, "big", "probe")).status === 200,
          60_000,
          r.server,
        );
      const cuts = () =>
        r.server.lines.filter((l) =>
          l.includes("client not reading its answer, connection cut")
        ).length;
      await budgetFree();
      let afterFirst = 0;
      for (let round = 1; round <= 6; round++) {
        const ended = await endedFor(r.url, "h1");
        for (const t of ["h1", "h2", "h3"]) {
          idle.push(await idleReader(r.url, "big", t));
        }
        await waitUntil(
          `round ${round}'s idle readers to be answered`,
          async () =>
            (await endedFor(r.url, "h1")) === ended + 1 &&
            (await endedFor(r.url, "h3")) === ended + 1,
          30_000,
          r.server,
        );
        // Main never cuts them (it gave their budget back at the request
        // timeout instead, the bytes still held).
        await waitUntil(
          `round ${round}'s idle readers to be cut`,
          () => cuts() === 3 * round,
          30_000,
          r.server,
        );
        await budgetFree();
        if (round === 1) afterFirst = await rssMiB(r.server.pid);
      }
      const afterSix = await rssMiB(r.server.pid);
      // Main held 60 MiB more per round for idle sockets (+300 MiB here);
      // measured with the cut: between -40 and +85 MiB, the garbage V8 has
      // not collected yet (10 rounds stayed within 185-245 MiB).
      assert.ok(
        afterSix - afterFirst < 128,
        `server RSS ${Math.round(afterFirst)} MiB after one round, ${
          Math.round(afterSix)
        } MiB after six`,
      );
      // The idle readers' connections were closed by the server, their
      // answers short of the whole.
      for (const c of idle) {
        let got = 0;
        await readUntilEnd(c, (bytes) => got += bytes.length, MIB);
        assert.ok(got < BIG, `an idle reader got ${got} bytes`);
      }
    } finally {
      for (const c of idle) {
        try {
          c.close();
        } catch {
          // already closed
        }
      }
      await r.close();
    }
  });
});
