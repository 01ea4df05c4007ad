// A real llama.cpp llama-server (../shared/llama next to the repository: the
// binary, the tiny random-weight model and start.sh) behind the relay's real
// server and worker processes. Where the directory is absent, or the CPU cannot
// run the binary, `LLAMA` says why and the tests that need it are ignored.
import {
  type Child,
  ROOT,
  spawnProgram,
  stopInReverse,
  waitUntil,
} from "../shell/procs.ts";
import { startRelayProcesses } from "../shell/demo/cluster.ts";
import { encodeOpToken } from "../shell/server/ops/op_token.ts";

/**
 * ../shared/llama relative to the repository root, as in CI; LLAMA_DIR in the
 * environment names another place (a git worktree one level deeper).
 */
export const LLAMA_DIR = Deno.env.get("LLAMA_DIR")?.replace(/\/?$/, "/") ??
  new URL("../shared/llama/", `file://${ROOT}`).pathname;
/** The model id llama-server serves (start.sh passes --alias tiny). */
export const LLAMA_MODEL = "tiny";
/** Tokens a slot holds (start.sh: -np 4 -c 4096). */
export const LLAMA_SLOT_CTX = 1024;

const SECRET = "e2e-llama-secret";
/** start.sh refuses to start without these (the binary needs x86-64-v3). */
const CPU_FLAGS = ["avx2", "fma", "f16c", "bmi2"];

/** Whether llama-server can run here, and if not, why. */
function availability(): { ok: true } | { ok: false; reason: string } {
  for (const f of ["start.sh", "llama-server", "tiny.gguf"]) {
    try {
      Deno.statSync(LLAMA_DIR + f);
    } catch {
      return { ok: false, reason: `${LLAMA_DIR}${f} is absent` };
    }
  }
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") {
    return {
      ok: false,
      reason:
        `the llama-server binary is built for linux x86_64, this is ${Deno.build.os} ${Deno.build.arch}`,
    };
  }
  try {
    const info = Deno.readTextFileSync("/proc/cpuinfo");
    const missing = CPU_FLAGS.filter((f) =>
      !new RegExp(`\\b${f}\\b`).test(info)
    );
    if (missing.length > 0) {
      return {
        ok: false,
        reason: `this CPU lacks ${
          missing.join(", ")
        }, which llama-server needs`,
      };
    }
  } catch {
    // No /proc/cpuinfo to read: let start.sh decide.
  }
  return { ok: true };
}

const found = availability();
/** True when llama-server cannot run here (llamaTest ignores its tests). */
const LLAMA_ABSENT = !found.ok;
if (!found.ok) {
  console.log(
    `SKIPPING the llama-server tests: ${found.reason} (they need ../shared/llama next to the repository: start.sh, llama-server, tiny.gguf)`,
  );
}

/** A test that needs llama-server: ignored, as said above, where it cannot run. */
export function llamaTest(
  name: string,
  fn: (t: Deno.TestContext) => Promise<void>,
): void {
  Deno.test({ name, ignore: LLAMA_ABSENT, fn });
}

export type Llama = { url: string; child: Child };

/**
 * Starts llama-server on a free port (start.sh 0; it logs the port it got) and
 * resolves once GET /health answers 200.
 */
export function startLlamaServer(extraArgs: string[] = []): Promise<Llama> {
  return startLlama("llama-server", `${LLAMA_DIR}start.sh`, [
    "0",
    ...extraArgs,
  ]);
}

/**
 * llama-server in router mode (no -m): it offers every model of --models-dir
 * (here only tiny), loads and unloads them on request (POST /models/load,
 * /models/unload) in child llama-server processes, which it stops when it is
 * stopped. Autoload is off, so a model runs only after a load.
 */
export function startLlamaRouter(): Promise<Llama> {
  return startLlama("llama-router", `${LLAMA_DIR}llama-server`, [
    "--models-dir",
    LLAMA_DIR,
    "--no-models-autoload",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
  ]);
}

async function startLlama(
  name: string,
  program: string,
  args: string[],
): Promise<Llama> {
  const child = spawnProgram({ name, program, args });
  try {
    const m = await child.waitForLine(
      /listening on (http:\/\/127\.0\.0\.1:\d+)/,
      30_000,
    );
    const url = m[1]!;
    await waitUntil(`${name} /health to answer 200`, async () => {
      const res = await fetch(`${url}/health`);
      await res.body?.cancel();
      return res.status === 200;
    }, 30_000);
    return { url, child };
  } catch (e) {
    await child.stop(3_000);
    throw e;
  }
}

export type LlamaCluster = {
  serverUrl: string;
  llama: Llama;
  server: Child;
  worker: Child;
};

/**
 * llama-server, the relay server and one worker (its models discovered from
 * llama-server: no MODELS), each a real process; all stopped afterwards.
 */
export async function withLlamaCluster(
  body: (c: LlamaCluster) => Promise<void>,
  opts: {
    serverEnv?: Record<string, string>;
    router?: boolean;
    /** More llama-server flags, e.g. --embeddings (issue 25). */
    llamaArgs?: string[];
  } = {},
): Promise<void> {
  const started: Child[] = [];
  try {
    const llama = opts.router
      ? await startLlamaRouter()
      : await startLlamaServer(opts.llamaArgs ?? []);
    started.push(llama.child);
    const { server, workers: [worker] } = await startRelayProcesses(started, {
      secret: SECRET,
      serverEnv: { TICK_MS: "20", ...opts.serverEnv },
      workers: [{ name: "e2e-llama", backendUrl: llama.url, maxConcurrent: 4 }],
    });
    await body({
      serverUrl: server.url,
      llama,
      server: server.child,
      worker: worker!,
    });
  } finally {
    await stopInReverse(started);
  }
}

/** A user message of about `tokens` tokens for the tiny model's vocabulary. */
export function longPrompt(tokens: number): string {
  // "hello world " is 2 tokens here (measured: 700 repeats = 1,428 prompt tokens
  // with the chat template).
  return "hello world ".repeat(Math.ceil(tokens / 2));
}

// ---- governed operations through the relay -----------------------------------

/** A test-only op-token key (committed on purpose: it guards nothing). */
export const KEY_PATH =
  new URL("./_op_token_test.key", import.meta.url).pathname;
/** Per-worker detail in /v1/capabilities is for the admin token only (issue 15). */
export const ADMIN_TOKEN = "e2e-llama-admin-token";
let nonce = 0;

/** A verifiedOpToken for `operation` on `modelId`, signed with KEY_PATH. */
export function opToken(operation: string, modelId: string): string {
  const key = Deno.readFileSync(KEY_PATH).slice(0, -1); // without the newline
  return encodeOpToken({
    operation,
    modelId,
    issuedAt: Math.floor(Date.now() / 1000),
    signers: ["admin1"],
    nonce: `e2e-llama-${Date.now()}-${nonce++}`,
  }, key);
}

/** POST a JSON body to the relay; the status and the parsed answer. */
export async function postJson(
  serverUrl: string,
  path: string,
  body: unknown,
  // deno-lint-ignore no-explicit-any
): Promise<{ status: number; body: any }> {
  const res = await fetch(serverUrl + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** A governed load of `modelId` through the relay: 202, then its task until it ends. */
export async function governedLoad(
  serverUrl: string,
  modelId: string,
  timeoutMs: number,
): Promise<{ status?: string }> {
  const r = await postJson(serverUrl, "/v1/models/load", {
    modelId,
    verifiedOpToken: opToken("model-load", modelId),
  });
  if (r.status !== 202) {
    throw new Error(`load answered ${r.status}: ${JSON.stringify(r.body)}`);
  }
  let task: { status?: string } = {};
  await waitUntil("the load task to finish", async () => {
    const res = await fetch(`${serverUrl}/v1/models/load/${r.body.taskId}`);
    task = await res.json();
    return task.status !== "loading";
  }, timeoutMs);
  return task;
}
