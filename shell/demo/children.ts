// Child processes for the demo and the end-to-end tests: `deno run` of one of our
// entry points with explicit permission flags, its output split into lines that
// can be awaited, and a stop that always ends in an exit.

/** The repository root (this file is shell/demo/children.ts). */
export const ROOT = decodeURIComponent(
  new URL("../../", import.meta.url).pathname,
);

export type ChildSpec = {
  /** Short name, used as the log prefix. */
  name: string;
  /** Entry point relative to the repository root, e.g. "shell/server/main.ts". */
  script: string;
  /** Deno permission flags, e.g. ["--allow-net=127.0.0.1"]. Never -A. */
  permissions: string[];
  args?: string[];
  /** Variables set on top of the inherited environment. */
  env?: Record<string, string>;
  /** Variables removed from the inherited environment (set them in `env` to override). */
  unsetEnv?: string[];
  /** A program to run instead of `deno run script` (redis-server in the cluster tests). */
  command?: string;
  /** Own process group, so a terminal's Ctrl-C reaches only the parent. */
  detached?: boolean;
  /** Called with every output line (stdout and stderr), without the newline. */
  onLine?: (line: string) => void;
};

export type Child = {
  name: string;
  pid: number;
  /** Every line printed so far (stdout and stderr interleaved as they arrive). */
  lines: string[];
  /** The exit status once the process has exited, else null. */
  exited: Deno.CommandStatus | null;
  status: Promise<Deno.CommandStatus>;
  /** Resolves with the first line matching `pattern`; rejects on exit or timeout. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Sends `signal` if the process still runs (no error if it has exited). */
  kill(signal?: Deno.Signal): void;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit status. */
  stop(graceMs?: number): Promise<Deno.CommandStatus>;
};

export function spawnChild(spec: ChildSpec): Child {
  return spawnProgram({
    ...spec,
    program: Deno.execPath(),
    args: [
      "run",
      ...spec.permissions,
      `${ROOT}${spec.script}`,
      ...(spec.args ?? []),
    ],
  });
}

/** Any program (not only our entry points), e.g. a real llama-server. */
export type ProgramSpec =
  & Pick<ChildSpec, "name" | "env" | "unsetEnv" | "detached" | "onLine">
  & { program: string; args: string[] };

export function spawnProgram(spec: ProgramSpec): Child {
  const env: Record<string, string> = {};
  const unset = new Set(spec.unsetEnv ?? []);
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!unset.has(k)) env[k] = v;
  }
  Object.assign(env, { NO_COLOR: "1" }, spec.env ?? {});
  const process = new Deno.Command(spec.program, {
    args: spec.args,
    cwd: ROOT,
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    detached: spec.detached ?? false,
  }).spawn();
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  const onLine = (line: string) => {
    lines.push(line);
    spec.onLine?.(line);
    for (const w of [...waiters]) w();
  };
  const pumps = [process.stdout, process.stderr].map((s) =>
    pumpLines(s, onLine)
  );
  const child: Child = {
    name: spec.name,
    pid: process.pid,
    lines,
    exited: null,
    status: Promise.all([process.status, ...pumps]).then(([s]) => {
      child.exited = s;
      for (const w of [...waiters]) w();
      return s;
    }),
    waitForLine(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        let from = 0;
        const check = () => {
          for (; from < lines.length; from++) {
            const m = pattern.exec(lines[from]!);
            if (m !== null) return done(() => resolve(m));
          }
          if (child.exited !== null) {
            done(() =>
              reject(
                new Error(
                  `${spec.name} exited (code ${child.exited?.code}) before printing ${pattern}:\n${
                    lines.slice(-20).join("\n")
                  }`,
                ),
              )
            );
          }
        };
        const timer = setTimeout(() =>
          done(() =>
            reject(
              new Error(
                `${spec.name} did not print ${pattern} within ${timeoutMs} ms:\n${
                  lines.slice(-20).join("\n")
                }`,
              ),
            )
          ), timeoutMs);
        const done = (settle: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      });
    },
    kill(signal = "SIGTERM") {
      if (child.exited !== null) return;
      try {
        process.kill(signal);
      } catch {
        // Exited between the check and the kill.
      }
    },
    async stop(graceMs = 10_000) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      try {
        return await child.status;
      } finally {
        clearTimeout(timer);
      }
    },
  };
  return child;
}

async function pumpLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<void> {
  let rest = "";
  try {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + text).split("\n");
      rest = parts.pop() ?? "";
      for (const p of parts) onLine(p.replace(/\r$/, ""));
    }
  } catch {
    // The pipe broke because the process died: what was read is kept.
  }
  if (rest !== "") onLine(rest);
}

/** Polls `check` until it resolves true; throws after `timeoutMs`. */
export async function waitUntil(
  label: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // Not ready yet (connection refused and the like).
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${label}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** True once GET `${serverUrl}/v1/models` lists `model`. */
export async function modelListed(
  serverUrl: string,
  model: string,
): Promise<boolean> {
  const res = await fetch(`${serverUrl}/v1/models`);
  const body = await res.json() as { data?: { id: string }[] };
  return res.ok && (body.data ?? []).some((m) => m.id === model);
}

/** Number of registered workers, from GET /health. */
export async function workersConnected(serverUrl: string): Promise<number> {
  const res = await fetch(`${serverUrl}/health`);
  const body = await res.json() as { workers_connected?: number };
  return body.workers_connected ?? 0;
}
