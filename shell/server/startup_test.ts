// The server process with the issue 15 settings: real processes.
import assert from "node:assert/strict";
import { runDeno } from "../procs.ts";
import { waitFor } from "./_test_helpers.ts";

const MAIN = new URL("./main.ts", import.meta.url).pathname;
const PERMS = ["--allow-net", "--allow-env", "--allow-read", "--allow-write"];

/** Starts the server; resolves with its port and everything it logged so far. */
async function startProcess(env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...PERMS, MAIN],
    env: { LISTEN_ADDR: "127.0.0.1:0", TICK_MS: "20", ...env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const collect = (s: ReadableStream<Uint8Array>) =>
    s.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({ write: (t) => void lines.push(t) }),
    );
  const reading = Promise.all([collect(child.stdout), collect(child.stderr)]);
  let port = 0;
  await waitFor("the server to listen", () => {
    const m = /address=127\.0\.0\.1:(\d+)/.exec(lines.join(""));
    if (m) port = Number(m[1]);
    return port !== 0;
  }, 20_000);
  return {
    port,
    log: () => lines.join(""),
    async stop() {
      child.kill("SIGKILL");
      await child.status;
      await reading;
    },
  };
}

Deno.test("issue 15 a WORKER_SECRET shorter than 16 characters is warned about at start; a long one is not", async () => {
  const short = await startProcess({ WORKER_SECRET: "s" });
  try {
    await waitFor("the warning", () => /shorter than 16/.test(short.log()));
    assert.match(short.log(), /WARN|warn/);
  } finally {
    await short.stop();
  }
  const long = await startProcess({ WORKER_SECRET: "x".repeat(16) });
  try {
    assert.doesNotMatch(long.log(), /shorter than 16/);
  } finally {
    await long.stop();
  }
});

Deno.test("issue 15 REGISTER_TIMEOUT_SECS closes a silent worker handshake; bad TRUSTED_PROXIES or MAX_CONNECTIONS stop the start in one line", async () => {
  const server = await startProcess({
    WORKER_SECRET: "a-long-enough-secret",
    REGISTER_TIMEOUT_SECS: "1",
  });
  try {
    const ws = new WebSocket(
      `ws://127.0.0.1:${server.port}/v1/worker/connect`,
      {
        headers: { "x-worker-secret": "a-long-enough-secret" },
      } as unknown as string[],
    );
    const started = performance.now();
    const closed = await new Promise<CloseEvent>((r) => ws.onclose = r);
    const ms = performance.now() - started;
    assert.equal(closed.code, 1002);
    assert.match(closed.reason, /no register message within 1 s/);
    assert.ok(ms > 800 && ms < 3000, `${ms} ms`);
  } finally {
    await server.stop();
  }
  for (
    const [name, value, says] of [
      ["TRUSTED_PROXIES", "10.0.0.0/99", /TRUSTED_PROXIES.*10\.0\.0\.0\/99/],
      ["MAX_CONNECTIONS", "many", /MAX_CONNECTIONS.*auto or a whole number/],
      ["BODY_TIMEOUT_SECS", "0", /BODY_TIMEOUT_SECS/],
    ] as const
  ) {
    const out = await runDeno(["run", ...PERMS, MAIN], {
      WORKER_SECRET: "s",
      [name]: value,
    });
    assert.equal(out.code, 2, name);
    const stderr = out.stderr;
    assert.match(stderr, says);
    assert.equal(stderr.trim().split("\n").length, 1, stderr);
  }
});
