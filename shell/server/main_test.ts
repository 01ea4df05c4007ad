import assert from "node:assert/strict";
import { runDeno } from "../procs.ts";
import { chatBody, SECRET, waitFor } from "./_test_helpers.ts";

const MAIN = new URL("./main.ts", import.meta.url).pathname;
const PERMS = ["--allow-net", "--allow-env", "--allow-read", "--allow-write"];

function runOnce(args: string[], env: Record<string, string> = {}) {
  return runDeno(["run", ...PERMS, MAIN, ...args], {
    WORKER_SECRET: "",
    ...env,
  });
}

Deno.test("server --help lists every option with its env name and default", async () => {
  const r = await runOnce(["--help"]);
  assert.equal(r.code, 0);
  for (
    const name of [
      "LISTEN_ADDR",
      "WORKER_SECRET",
      "MAX_QUEUE_LEN",
      "QUEUE_TIMEOUT_SECS",
    ]
  ) {
    assert.match(r.stdout, new RegExp(name));
  }
  assert.match(r.stdout, /127\.0\.0\.1:8080/);
});

Deno.test("server refuses to start without WORKER_SECRET or with invalid values, in one line", async () => {
  const missing = await runOnce([]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /WORKER_SECRET is required/);
  const bad = await runOnce([], { WORKER_SECRET: "s", MAX_QUEUE_LEN: "lots" });
  assert.equal(bad.code, 2);
  assert.match(
    bad.stderr,
    /MAX_QUEUE_LEN \(--max-queue-len\) must be a whole number, got "lots"/,
  );
  const addr = await runOnce(["--listen-addr", "nowhere"], {
    WORKER_SECRET: "s",
  });
  assert.equal(addr.code, 2);
  assert.match(addr.stderr, /LISTEN_ADDR/);
});

Deno.test("C30 SIGTERM: new requests get 503, workers get graceful_shutdown, the stream finishes, exit 0", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...PERMS, MAIN],
    env: { WORKER_SECRET: SECRET, LISTEN_ADDR: "127.0.0.1:0", TICK_MS: "20" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const decoder = new TextDecoderStream();
  const reading = child.stdout.pipeThrough(decoder).pipeTo(
    new WritableStream({ write: (t) => void lines.push(t) }),
  );
  const stderr = child.stderr.pipeTo(new WritableStream());
  try {
    let port = 0;
    await waitFor("the server to listen", () => {
      const m = /address=127\.0\.0\.1:(\d+)/.exec(lines.join(""));
      if (m) port = Number(m[1]);
      return port !== 0;
    });
    const url = `http://127.0.0.1:${port}`;
    const ws = new WebSocket(
      `ws://127.0.0.1:${port}/v1/worker/connect?provider=local`,
      {
        headers: { "x-worker-secret": SECRET },
      } as unknown as string[],
    );
    const frames: { type: string; request_id?: string }[] = [];
    ws.onmessage = (e) => frames.push(JSON.parse(e.data));
    const wsClosed = new Promise<CloseEvent>((r) => ws.onclose = r);
    await new Promise((r) => ws.onopen = r);
    ws.send(
      JSON.stringify({
        type: "register",
        worker_name: "w",
        models: ["m1"],
        max_concurrent: 2,
      }),
    );
    await waitFor(
      "register_ack",
      () => frames.some((f) => f.type === "register_ack"),
    );
    const streaming = fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      body: chatBody("m1", true),
    });
    await waitFor(
      "the request",
      () => frames.some((f) => f.type === "request"),
    );
    const id = frames.find((f) => f.type === "request")!.request_id!;
    ws.send(
      JSON.stringify({
        type: "response_chunk",
        request_id: id,
        chunk: "data: 1\n\n",
      }),
    );
    const res = await streaming;
    child.kill("SIGTERM");
    await waitFor(
      "graceful_shutdown",
      () => frames.some((f) => f.type === "graceful_shutdown"),
    );
    const refused = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      body: chatBody(),
    });
    assert.equal(refused.status, 503);
    assert.ok(refused.headers.get("retry-after") !== null);
    await refused.body?.cancel();
    ws.send(
      JSON.stringify({
        type: "response_chunk",
        request_id: id,
        chunk: "data: [DONE]\n\n",
      }),
    );
    ws.send(
      JSON.stringify({
        type: "response_complete",
        request_id: id,
        status_code: 200,
      }),
    );
    assert.equal(await res.text(), "data: 1\n\ndata: [DONE]\n\n");
    assert.equal((await wsClosed).code, 1000);
    const status = await child.status;
    assert.equal(status.code, 0);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already exited */ }
    await child.status;
    await reading.catch(() => {});
    await stderr.catch(() => {});
  }
});
