// Child processes and bounded waits, one module for the demo, the tests and the
// benchmarks: `deno run` of one of our entry points (or any program) with
// explicit permission flags, its output split into lines that can be awaited,
// a stop that always ends in an exit; and polling a condition with a bound
// instead of sleeping a fixed time.

/** The repository root (this file is shell/procs.ts). */
export const ROOT = decodeURIComponent(
  new URL("../", import.meta.url).pathname,
);

/** What a finished command printed, as text, and its exit code. */
export type Output = { code: number; stdout: string; stderr: string };

/**
 * Runs `program` to its end, in the repository root with stdin closed; `env`
 * is added to this process's environment.
 */
export async function runProgram(
  program: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<Output> {
  const out = await new Deno.Command(program, {
    args,
    env,
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return {
    code: out.code,
    stdout: text.decode(out.stdout),
    stderr: text.decode(out.stderr),
  };
}

/** Runs `deno <args>` with this very binary (see runProgram). */
export function runDeno(
  args: string[],
  env: Record<string, string> = {},
): Promise<Output> {
  return runProgram(Deno.execPath(), args, env);
}

export type ChildSpec = {
  /** Short name, used as the log prefix. */
  name: string;
  /**
   * Entry point relative to the repository root, e.g. "shell/server/main.ts",
   * or an absolute path (another checkout's, for the benchmarks' baseline).
   */
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
  /**
   * Keep about this many of the latest lines instead of all (a long benchmark
   * run logs more than is worth holding); waitForLine sees only kept lines.
   */
  linesKept?: number;
};

export type Child = {
  name: string;
  pid: number;
  /** Every line printed so far (stdout and stderr interleaved as they arrive), or the latest `linesKept`. */
  lines: string[];
  /** The last `n` lines as one text, for an error message. */
  tail(n?: number): string;
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
      spec.script.startsWith("/") ? spec.script : `${ROOT}${spec.script}`,
      ...(spec.args ?? []),
    ],
  });
}

/** Any program (not only our entry points), e.g. a real llama-server. */
export type ProgramSpec =
  & Pick<
    ChildSpec,
    "name" | "env" | "unsetEnv" | "detached" | "onLine" | "linesKept"
  >
  & { program: string; args: string[] };

/** The program started from the repository root, with our environment minus `unsetEnv`, plus `env`. */
function startProcess(spec: ProgramSpec): Deno.ChildProcess {
  const env: Record<string, string> = {};
  const unset = new Set(spec.unsetEnv ?? []);
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!unset.has(k)) env[k] = v;
  }
  Object.assign(env, { NO_COLOR: "1" }, spec.env ?? {});
  return new Deno.Command(spec.program, {
    args: spec.args,
    cwd: ROOT,
    env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    detached: spec.detached ?? false,
  }).spawn();
}

export function spawnProgram(spec: ProgramSpec): Child {
  const process = startProcess(spec);
  const lines: string[] = [];
  /** Lines dropped from the front of `lines` (linesKept). */
  let dropped = 0;
  const waiters = new Set<() => void>();
  const onLine = (line: string) => {
    lines.push(line);
    const kept = spec.linesKept;
    if (kept !== undefined && lines.length > kept * 2) {
      const cut = lines.length - kept;
      lines.splice(0, cut);
      dropped += cut;
    }
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
    tail: (n = 40) => lines.slice(-n).join("\n"),
    exited: null,
    status: Promise.all([process.status, ...pumps]).then(([s]) => {
      child.exited = s;
      for (const w of [...waiters]) w();
      return s;
    }),
    waitForLine(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        let from = dropped; // counted from the first line ever printed
        const check = () => {
          if (from < dropped) from = dropped;
          for (; from < dropped + lines.length; from++) {
            const m = pattern.exec(lines[from - dropped]!);
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

/**
 * Polls `check` until it resolves true, for something outside this process (a
 * child starting up): a check that throws (connection refused and the like)
 * means not yet. Throws after `timeoutMs`, with the child's last lines if given.
 */
export async function waitUntil(
  label: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
  child?: Pick<Child, "name" | "tail">,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // Not ready yet.
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${label}` +
          (child === undefined
            ? ""
            : `\n--- ${child.name} output ---\n${child.tail()}`),
      );
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Polls `check` every few ms until it returns true, for a condition inside
 * this process (a test's socket or server); a check that throws fails at once.
 */
export async function waitFor(
  label: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${label}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Rejects if `promise` takes longer than `timeoutMs`; always clears its timer. */
export async function within<T>(
  label: string,
  promise: Promise<T>,
  timeoutMs = 5_000,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(`timed out after ${timeoutMs} ms waiting for ${label}`),
        ),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/**
 * Stops `started` last first (workers drain before their server goes, the
 * server before its backend), each with SIGTERM and SIGKILL after `graceMs`;
 * `onStopped` hears each exit. The one teardown of the e2e tests, the
 * benchmarks, the cluster tests and the demo. The list is left as it was.
 */
export async function stopInReverse(
  started: readonly Child[],
  graceMs = 5_000,
  onStopped?: (c: Child, status: Deno.CommandStatus) => void,
): Promise<void> {
  for (const c of [...started].reverse()) {
    const status = await c.stop(graceMs);
    onStopped?.(c, status);
  }
}

/** Runs `body` with a list to push started children on; stops them all afterwards, whatever `body` did. */
export async function withChildren<T>(
  body: (started: Child[]) => Promise<T>,
  graceMs = 5_000,
): Promise<T> {
  const started: Child[] = [];
  try {
    return await body(started);
  } finally {
    await stopInReverse(started, graceMs);
  }
}
