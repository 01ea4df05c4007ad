// chunk-bytes-v1 (issue 18) through real processes: server and worker
// negotiate binary chunk frames, and what a streaming client receives is
// byte-identical to what the text path gives: the backend's own bytes, with
// characters cut across backend writes intact (C45), and invalid UTF-8
// replaced (U+FFFD) exactly as the streaming decoder of the text path does.
import assert from "node:assert/strict";
import { startRelayProcesses } from "../shell/demo/cluster.ts";
import { type Child, stopInReverse } from "../shell/procs.ts";
import { startScriptedBackend } from "../mock/scripted.ts";
import { postChat } from "./_post_chat.ts";

const SECRET = "e2e-secret";

const b = (...xs: (string | number[])[]) =>
  new Uint8Array(
    xs.flatMap((x) =>
      typeof x === "string" ? [...new TextEncoder().encode(x)] : x
    ),
  );

/** Backend writes per script (each write its own read: a pause in between). */
const SCRIPTS: Record<string, Uint8Array[]> = {
  split: [
    b('data: {"t":"h', [0xc3]),
    b([0xa9], "llo ", [0xe2, 0x82]),
    b([0xac], '"}\n\n', [0xf0, 0x9f]),
    b([0x98]),
    b([0x80], " done\n\ndata: [DONE]\n\n"),
  ],
  invalid: [
    b("data: a", [0xff], " b", [0xc3]),
    b("(\n\n", [0xed, 0xa0, 0x80], " x", [0xe2, 0x82]),
    b("A\n\n"),
    b("end ", [0xf0, 0x9f]),
  ],
};

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}

/** A backend that streams the script named by the request body's `script`. */
function scriptedBackend() {
  return startScriptedBackend(async (req) => {
    // The worker also probes capabilities (GET): nothing here for it.
    const body = await req.json().catch(() => null) as
      | { script?: string }
      | null;
    return SCRIPTS[body?.script ?? ""];
  }, 20);
}

async function streamBytes(serverUrl: string, script: string) {
  const res = await postChat(serverUrl, { model: "raw", stream: true, script });
  assert.equal(res.status, 200);
  return new Uint8Array(await res.arrayBuffer());
}

Deno.test("issue 18 C45 a stream through server and worker with chunk-bytes-v1 is byte-identical to the text path (split characters, invalid UTF-8)", async () => {
  const backend = scriptedBackend();
  const started: Child[] = [];
  try {
    const { server, workers: [worker] } = await startRelayProcesses(started, {
      secret: SECRET,
      workers: [{
        name: "bytes-worker",
        backendUrl: backend.url,
        env: { MODELS: "raw" },
      }],
    });
    assert.ok(
      worker!.lines.some((l) =>
        l.includes("registered") && l.includes("chunk-bytes-v1")
      ),
      "the worker did not negotiate chunk-bytes-v1",
    );
    // Valid input: the backend's very bytes.
    assert.deepEqual(
      await streamBytes(server.url, "split"),
      concat(SCRIPTS.split!),
    );
    // Invalid input: what the text path's streaming decoder makes of it.
    assert.deepEqual(
      await streamBytes(server.url, "invalid"),
      new TextEncoder().encode(
        new TextDecoder().decode(concat(SCRIPTS.invalid!)),
      ),
    );
  } finally {
    await stopInReverse(started);
    await backend.close();
  }
});
