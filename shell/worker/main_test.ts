// The worker as a process: `deno run` of main.ts, as `deno task worker` runs it.
import assert from "node:assert/strict";
import { startMockBackend } from "../../mock/backend.ts";
import { waitFor, within } from "../procs.ts";
import { startTestProxy } from "./_test_proxy.ts";
import { requestFrame } from "./_test_worker.ts";

const MAIN = new URL("./main.ts", import.meta.url).pathname;

function workerCommand(env: Record<string, string>, args: string[] = []) {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net",
      "--allow-env",
      "--allow-read",
      "--allow-sys=hostname",
      MAIN,
      ...args,
    ],
    env: {
      NO_COLOR: "1",
      MODELS: "",
      MAX_CONCURRENT: "",
      MAX_CONCURRENCY: "",
      ...env,
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  });
}

Deno.test("worker refuses to start without WORKER_SECRET, with a one-line reason", async () => {
  const out = await workerCommand({ WORKER_SECRET: "" }).output();
  const stderr = new TextDecoder().decode(out.stderr).trim();
  assert.equal(out.code, 2);
  assert.equal(stderr.split("\n").length, 1);
  assert.match(stderr, /WORKER_SECRET .*required/);
});

Deno.test("issue 32: a --config file that cannot be read or parsed: error: failed to read/parse ..., exit 1", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const missing = await workerCommand({}, [
      "--config",
      `${dir}/none.toml`,
    ]).output();
    assert.equal(missing.code, 1);
    assert.match(
      new TextDecoder().decode(missing.stderr),
      /^error: failed to read config file '.*none\.toml': /,
    );
    Deno.writeTextFileSync(`${dir}/bad.toml`, "proxy_url = http://x\n");
    const bad = await workerCommand({}, ["--config", `${dir}/bad.toml`])
      .output();
    assert.equal(bad.code, 1);
    assert.match(
      new TextDecoder().decode(bad.stderr),
      /^error: failed to parse config file '.*bad\.toml': line 1: /,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("worker --help lists each option with its environment name and default", async () => {
  const out = await workerCommand({}, ["--help"]).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0);
  for (
    const env of [
      "PROXY_URL",
      "WORKER_SECRET",
      "WORKER_NAME",
      "BACKEND_URL",
      "MODELS",
    ]
  ) {
    assert.match(text, new RegExp(env));
  }
  assert.match(text, /http:\/\/127\.0\.0\.1:8080/);
  assert.match(text, /MAX_CONCURRENT, MAX_CONCURRENCY\s+default 4/);
});

Deno.test("worker exits 1 with a clear message when models cannot be discovered", async () => {
  const out = await workerCommand({
    WORKER_SECRET: "s",
    BACKEND_URL: "http://127.0.0.1:1",
  }).output();
  assert.equal(out.code, 1);
  assert.match(
    new TextDecoder().decode(out.stderr),
    /could not discover models/,
  );
});

Deno.test("C29 SIGTERM drains: the in-flight stream finishes, the socket closes 1000, exit 0", async () => {
  const backend = await startMockBackend({
    chunkDelayMs: 15,
    models: ["disc-model"],
  });
  const proxy = await startTestProxy();
  const child = workerCommand({
    PROXY_URL: proxy.url,
    WORKER_SECRET: "test-secret",
    BACKEND_URL: backend.url,
  }).spawn();
  const logs = child.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream(),
  );
  const errs = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream(),
  );
  try {
    const reg = await proxy.waitFrame(
      "register",
      (f) => f.type === "register",
      15_000,
    );
    assert.deepEqual(
      reg.models,
      ["disc-model"],
      "models discovered from /v1/models",
    );
    await waitFor("ack delivered", () => proxy.isOpen());
    proxy.send(
      requestFrame("r1", { stream: true, max_tokens: 30, model: "disc-model" }),
    );
    await proxy.waitFrame("first chunk", (f) => f.type === "response_chunk");
    child.kill("SIGTERM");
    const update = await proxy.waitFrame(
      "models_update",
      (f) => f.type === "models_update",
    );
    assert.deepEqual(update.models, []);
    const status = await within("worker exit", child.status, 10_000);
    assert.equal(status.code, 0);
    const last = proxy.frames.filter((f) => f.request_id === "r1").at(-1)!;
    assert.equal(last.type, "response_complete");
    assert.equal(last.status_code, 200);
    assert.equal(backend.stats.completedStreams, 1);
    await waitFor("close seen", () => proxy.closes.length === 1);
    assert.equal(proxy.closes[0]?.code, 1000);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already exited.
    }
    await child.status;
    await logs;
    await errs;
    await proxy.close();
    await backend.close();
  }
});
