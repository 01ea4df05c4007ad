// A bench-only server entry for proving that bench:ci's CPU gate bites (issue
// 31): it runs the real server (shell/server/main.ts) after making every binary
// frame from a worker (chunk-bytes-v1: one backend read, one or more SSE
// events) cost BENCH_MUTANT_US_PER_CHUNK more µs of CPU per SSE event in it.
// Set to the server's own µs per chunk from a normal run, it doubles the
// server's work per chunk, which is what a lost optimisation (a parse or an
// encoding again per chunk) looks like. Never imported by the relay itself.
import WebSocket from "ws";

const usPerChunk = Number(Deno.env.get("BENCH_MUTANT_US_PER_CHUNK") ?? "0");
if (!(usPerChunk > 0)) {
  throw new Error("BENCH_MUTANT_US_PER_CHUNK must be a positive number");
}

/** SSE events in a frame: the blank lines that end them (LF LF). */
function events(bytes: Uint8Array): number {
  let n = 0;
  for (let i = 1; i < bytes.length; i++) {
    if (bytes[i] === 10 && bytes[i - 1] === 10) n++;
  }
  return Math.max(n, 1);
}

/** Busy for `us` µs of wall time (the CPU stays on this thread meanwhile). */
function burn(us: number): void {
  const until = performance.now() + us / 1000;
  while (performance.now() < until) {
    // spin
  }
}

type Emit = (this: WebSocket, event: string, ...args: unknown[]) => boolean;
const proto = WebSocket.prototype as unknown as { emit: Emit };
const emit = proto.emit;
proto.emit = function (this: WebSocket, event: string, ...args: unknown[]) {
  const [data, isBinary] = args;
  if (event === "message" && isBinary === true && data instanceof Uint8Array) {
    burn(usPerChunk * events(data));
  }
  return emit.call(this, event, ...args);
};

await import("../../shell/server/main.ts");
