// `deno task demo` as a newcomer runs it: the printed curl command streams an
// answer within 30 s of starting, and Ctrl-C (SIGINT) stops all three processes.
import assert from "node:assert/strict";
import { ROOT, runDeno, spawnChild } from "../procs.ts";
import { curlCommands } from "./main.ts";

/** Reads URL, headers and body out of a printed `curl ... -H '...' -d '...'` line. */
function parseCurl(
  line: string,
): { url: string; headers: Record<string, string>; body: string } {
  const url = /curl (?:-N )?(\S+)/.exec(line)?.[1];
  const body = /-d '([^']*)'/.exec(line)?.[1];
  assert.ok(
    url !== undefined && body !== undefined,
    `not a curl line: ${line}`,
  );
  const headers: Record<string, string> = {};
  for (const m of line.matchAll(/-H '([^:]+): ([^']*)'/g)) {
    headers[m[1]!] = m[2]!;
  }
  return { url, headers, body };
}

function processExists(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT"); // Harmless to a live process; throws if gone.
    return true;
  } catch {
    return false;
  }
}

Deno.test("demo: the printed streaming curl command answers within 30 s of start, and SIGINT stops all three processes", async () => {
  const startedAt = performance.now();
  // `deno task demo` itself, so the task's permission flags are what is tested.
  const demo = new Deno.Command(Deno.execPath(), {
    args: ["task", "demo", "--port", "0", "--quiet"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const reading = [demo.stdout, demo.stderr].map((s) =>
    s.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({
        write(t) {
          lines.push(...t.split("\n"));
        },
      }),
    )
  );
  const childPids = () =>
    lines.flatMap((l) => {
      const m = /^\[demo\] (\S+) started \(pid (\d+)\)/.exec(l);
      return m ? [Number(m[2])] : [];
    });
  let exited = false;
  const status = demo.status.then((s) => {
    exited = true;
    return s;
  });
  try {
    const deadline = startedAt + 30_000;
    let curlLine: string | undefined;
    while (curlLine === undefined) {
      assert.ok(!exited, `demo exited early:\n${lines.join("\n")}`);
      assert.ok(
        performance.now() < deadline,
        `no curl line within 30 s:\n${lines.join("\n")}`,
      );
      curlLine = lines.find((l) =>
        /curl -N \S+\/v1\/chat\/completions/.test(l)
      );
      if (curlLine === undefined) await new Promise((r) => setTimeout(r, 20));
    }
    const { url, headers, body } = parseCurl(curlLine);
    assert.match(body, /"stream":true/);
    const res = await fetch(url, {
      method: "POST",
      headers,
      body,
      signal: AbortSignal.timeout(Math.max(1, deadline - performance.now())),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    const text = await res.text();
    const words = [...text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1])
      .join("");
    assert.match(words, /quick brown fox/);
    assert.match(text, /data: \[DONE\]/);
    const elapsedMs = performance.now() - startedAt;
    assert.ok(elapsedMs < 30_000, `answered after ${elapsedMs} ms`);
    assert.equal(childPids().length, 3);

    demo.kill("SIGINT");
    const s = await status;
    await Promise.all(reading);
    assert.equal(s.code, 0, lines.join("\n"));
    for (const name of ["demo-worker", "server", "mock"]) {
      assert.ok(
        lines.some((l) =>
          new RegExp(`^\\[demo\\] ${name} \\(pid \\d+\\) exited with code 0$`)
            .test(l)
        ),
        `${name} did not exit with 0:\n${lines.join("\n")}`,
      );
    }
    for (const pid of childPids()) {
      assert.ok(!processExists(pid), `child ${pid} still runs`);
    }
  } finally {
    if (!exited) demo.kill("SIGKILL");
    await status;
    await Promise.allSettled(reading);
    for (const pid of childPids()) {
      if (processExists(pid)) Deno.kill(pid, "SIGKILL");
    }
  }
});

Deno.test("demo --help describes its options and exits 0 without starting anything", async () => {
  const out = await runDeno(["task", "demo", "--help"]);
  const text = out.stdout;
  assert.equal(out.code, 0);
  assert.match(text, /--port/);
  assert.match(text, /--delay-ms/);
});

// spawnChild is what the demo uses; one direct check of its contract.
Deno.test("spawnChild: waitForLine rejects with the output when the process exits first", async () => {
  const child = spawnChild({
    name: "server",
    script: "shell/server/main.ts",
    permissions: ["--allow-env", "--allow-read"],
    env: { WORKER_SECRET: "" },
    unsetEnv: ["WORKER_SECRET"],
  });
  await assert.rejects(
    child.waitForLine(/never printed/),
    /exited \(code 2\) before printing[\s\S]*WORKER_SECRET is required/,
  );
  assert.equal((await child.status).code, 2);
});

Deno.test("demo prints curl for streamed and plain chat, messages, models and health, and the dashboard and setup URLs", () => {
  const text = curlCommands("http://127.0.0.1:8080", "tok");
  for (
    const pattern of [
      /curl -N http:\/\/127\.0\.0\.1:8080\/v1\/chat\/completions .*"stream":true/,
      /curl http:\/\/127\.0\.0\.1:8080\/v1\/chat\/completions .*"stream":false/,
      /curl http:\/\/127\.0\.0\.1:8080\/v1\/messages .*anthropic-version/,
      /curl http:\/\/127\.0\.0\.1:8080\/v1\/models$/m,
      /curl http:\/\/127\.0\.0\.1:8080\/health$/m,
      /http:\/\/127\.0\.0\.1:8080\/dashboard .*tok/,
      /http:\/\/127\.0\.0\.1:8080\/setup$/m,
    ]
  ) assert.match(text, pattern);
});
