// Issue 14, "real backends and real faults": failures seen on main whose fix is
// in the server core (drain-v1, body-chunks-v1, requeue to another worker and
// the backend circuit, the requeue deadline), replayed with real processes.
import assert from "node:assert/strict";
import { workersConnected } from "../shell/demo/relay_probes.ts";
import { waitUntil } from "../shell/procs.ts";
import {
  chat,
  faultTest,
  MODEL,
  startMock,
  startServer,
  startWorker,
  withChildren,
} from "./_faults.ts";

faultTest(
  "issue 14.2: one large non-streaming answer (17 MiB) reaches the client and does not knock the worker offline",
  async (started) => {
    const mock = await startMock(started);
    const server = await startServer(started);
    const worker = await startWorker(started, "big", server, mock.url);
    const chars = 17 * 1024 * 1024;
    const r = await chat(server, { mock_body_chars: chars });
    assert.equal(r.status, 200, r.text.slice(0, 500));
    const body = JSON.parse(r.text);
    assert.equal(body.choices[0].message.content.length, chars);
    // Ran once, on a worker that never lost its connection.
    assert.equal((await mock.stats()).requests, 1);
    assert.ok(
      !worker.lines.some((l) => /disconnected from proxy/.test(l)),
      worker.lines.join("\n"),
    );
    assert.equal(await workersConnected(server), 1);
  },
);

faultTest(
  "issue 14.3: a worker whose backend is down does not take the traffic: its requests go to the healthy worker",
  async (started) => {
    const mock = await startMock(started);
    const server = await startServer(started);
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const closed = `http://127.0.0.1:${(l.addr as Deno.NetAddr).port}`;
    l.close();
    await startWorker(started, "down", server, closed, { MODELS: MODEL });
    await startWorker(started, "up", server, mock.url);
    await waitUntil(
      "both workers registered",
      async () => (await workersConnected(server)) === 2,
    );
    const results = await Promise.all(
      Array.from({ length: 20 }, () => chat(server, { max_tokens: 3 })),
    );
    const statuses = results.map((r) => r.status);
    assert.deepEqual(
      statuses,
      Array(20).fill(200),
      results.find((r) => r.status !== 200)?.text ?? "",
    );
  },
);

faultTest(
  "issue 14.1: a draining worker's models queue instead of answering 404",
  async (started) => {
    const mock = await startMock(started, { delayMs: 20 });
    const server = await startServer(started);
    const draining = await startWorker(started, "draining", server, mock.url, {
      MAX_CONCURRENT: "1",
    });
    // 100 words × 20 ms: the worker drains for ~2 s with this stream in flight.
    const inFlight = chat(server, { stream: true, max_tokens: 100 });
    await waitUntil(
      "the stream to reach the backend",
      async () => (await mock.stats()).openStreams === 1,
    );
    draining.kill("SIGTERM");
    await draining.waitForLine(/graceful shutdown/);
    // Give the server the worker's drain notice before the next request.
    await new Promise((r) => setTimeout(r, 200));
    const asked = chat(server, { max_tokens: 2 });
    const early = await Promise.race([
      asked.then((r) => r.status),
      new Promise((r) => setTimeout(() => r("waiting"), 500)),
    ]);
    assert.equal(early, "waiting", "answered while its only worker drains");
    // A fresh worker takes the queued request.
    await startWorker(started, "fresh", server, mock.url);
    const r = await asked;
    assert.equal(r.status, 200, r.text);
    assert.equal((await inFlight).status, 200);
    assert.equal((await draining.status).code, 0);
  },
);

faultTest(
  "issue 14.8: a requeue keeps the request's queue deadline instead of restarting it",
  async (started) => {
    const mock = await startMock(started);
    const server = await startServer(started, { QUEUE_TIMEOUT_SECS: "2" });
    const victim = await startWorker(started, "victim", server, mock.url);
    const t0 = performance.now();
    // Held on the worker for ~5 s (50 words × 100 ms).
    const asked = chat(server, { max_tokens: 50, mock_delay_ms: 100 });
    await waitUntil(
      "the backend to receive the request",
      async () => (await mock.stats()).requests === 1,
    );
    await new Promise((r) => setTimeout(r, 1_500 - (performance.now() - t0)));
    victim.kill("SIGKILL");
    // Requeued with no worker left: it times out 2 s after it arrived, not
    // 2 s after the requeue (3.5 s).
    const r = await asked;
    const elapsed = performance.now() - t0;
    assert.equal(r.status, 504, r.text);
    assert.ok(elapsed < 3_000, `answered after ${Math.round(elapsed)} ms`);
  },
);

/**
 * One try at the race of issue 14.9: every request answered 200 (asserted);
 * returns whether a request did reach the worker after its drain began.
 */
async function drainRace(): Promise<boolean> {
  let raced = false;
  await withChildren(async (started) => {
    const mock = await startMock(started, { delayMs: 20 });
    const serverUrl = await startServer(started);
    const leaving = await startWorker(started, "leaving", serverUrl, mock.url, {
      MAX_CONCURRENT: "64",
    });
    // A long stream keeps the leaving worker around while it drains.
    const held = chat(serverUrl, { stream: true, max_tokens: 150 });
    await waitUntil(
      "the stream to reach the backend",
      async () => (await mock.stats()).openStreams === 1,
    );
    await startWorker(started, "staying", serverUrl, mock.url, {
      MAX_CONCURRENT: "64",
    });
    // The race, made wide: the worker is frozen while the server sends it
    // requests, and sees its SIGTERM as it wakes, with them unread.
    leaving.kill("SIGSTOP");
    try {
      const asked = Array.from(
        { length: 40 },
        () => chat(serverUrl, { max_tokens: 2 }),
      );
      await new Promise((r) => setTimeout(r, 500));
      leaving.kill("SIGTERM");
      await new Promise((r) => setTimeout(r, 50));
      leaving.kill("SIGCONT");
      const results = await Promise.all(asked);
      assert.deepEqual(
        results.filter((r) => r.status !== 200).map((r) =>
          `${r.status} retry-after=${r.headers.get("retry-after")} ${r.text}`
        ),
        [],
      );
    } finally {
      leaving.kill("SIGCONT");
    }
    assert.equal((await held).status, 200);
    raced = leaving.lines.some((l) => /refused request while draining/.test(l));
  });
  return raced;
}

Deno.test("issue 14.9: requests that reach a worker as it starts draining are requeued to another worker, not failed 503", async () => {
  // Which the woken worker reads first, its SIGTERM or the frames, is up to
  // its event loop: on a busy machine the race is retried until it happened.
  let raced = false;
  for (let attempt = 0; attempt < 4 && !raced; attempt++) {
    raced = await drainRace();
  }
  assert.ok(raced, "no request reached the draining worker in 4 tries");
});
