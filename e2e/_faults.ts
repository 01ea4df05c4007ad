// Real processes for the issue 14 tests (e2e/real_faults*_test.ts): the mock
// backend with its stats port and fault modes, servers and workers, each a
// `deno run` child, all stopped whatever the test did.
import type { MockBackendStats } from "../mock/backend.ts";
import { type Child, withChildren } from "../shell/procs.ts";
import {
  startMockProcess,
  startServerProcess,
  startWorkerProcess,
} from "../shell/demo/cluster.ts";
import { postChat } from "./_post_chat.ts";

export const SECRET = "e2e-faults";
export const MODEL = "mock-model";

export type Mock = { url: string; stats(): Promise<MockBackendStats> };

export async function startMock(
  started: Child[],
  opts: { delayMs?: number; args?: string[] } = {},
): Promise<Mock> {
  const mock = await startMockProcess({
    script: "e2e/_mock_with_stats.ts",
    delayMs: opts.delayMs ?? 10,
    models: [MODEL],
    args: opts.args ?? [],
  });
  started.push(mock.child);
  const statsUrl = (await mock.child.waitForLine(/stats on (\S+)/))[1]!;
  return {
    url: mock.url,
    stats: async () => await (await fetch(statsUrl)).json(),
  };
}

export async function startServer(
  started: Child[],
  env: Record<string, string> = {},
  port = 0,
): Promise<string> {
  const server = await startServerProcess({
    secret: SECRET,
    port,
    env: { TICK_MS: "20", ...env },
  });
  started.push(server.child);
  return server.url;
}

export async function startWorker(
  started: Child[],
  name: string,
  serverUrl: string,
  backendUrl: string,
  env: Record<string, string> = {},
): Promise<Child> {
  const child = await startWorkerProcess({
    name,
    serverUrl,
    secret: SECRET,
    backendUrl,
    env: { LOG_LEVEL: "debug", ...env },
  });
  started.push(child);
  return child;
}

/** POST /v1/chat/completions; the status and the whole body as text. */
export async function chat(
  serverUrl: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await postChat(serverUrl, {
    model: MODEL,
    messages: [{ role: "user", content: "Hello!" }],
    ...body,
  }, { headers });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Stops every child, last started first, whatever the test did (shell/procs.ts). */
export { withChildren };

/** A test on its own processes: `fn` starts them on `started`, all stopped after it whatever it did. */
export function faultTest(
  name: string,
  fn: (started: Child[]) => Promise<void>,
): void {
  Deno.test(name, () => withChildren(fn));
}

/** Resident memory of a process in MiB (`ps`: /proc needs --allow-all in Deno). */
export async function rssMiB(pid: number): Promise<number> {
  const out = await new Deno.Command("ps", {
    args: ["-o", "rss=", "-p", String(pid)],
    stdout: "piped",
    stderr: "null",
  }).output();
  return Number(new TextDecoder().decode(out.stdout).trim() || "0") / 1024;
}
