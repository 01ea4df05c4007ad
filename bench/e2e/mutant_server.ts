// A bench-only server entry for proving that bench:ci's CPU gate bites (issue
// 31): it runs the real server (shell/server/main.ts) after making every binary
// frame from a worker (chunk-bytes-v1: one backend read, one or more SSE
// events) cost BENCH_MUTANT_US_PER_CHUNK more µs of CPU per SSE event in it.
// Set to the server's own µs per chunk from a normal run, it doubles the
// server's work per chunk, which is what a lost optimisation (a parse or an
// encoding again per chunk) looks like. Never imported by the relay itself.
//
// The hook: our WebSocket parser (shell/ws/frame.ts) gives each binary
// message its own bytes with `Uint8Array.prototype.slice`; a slice that is a
// chunk-bytes-v1 frame (kind 0x01, then the request id's length, the id) is
// one frame from a worker.
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

const slice = Uint8Array.prototype.slice;
Uint8Array.prototype.slice = function (
  this: Uint8Array,
  start?: number,
  end?: number,
) {
  const out = slice.call(this, start, end);
  if (start === undefined && end === undefined && looksLikeChunkFrame(out)) {
    burn(usPerChunk * events(out));
  }
  return out;
} as typeof slice;

/** A chunk-bytes-v1 frame: kind 0x01, an id length, an id of printable ASCII. */
function looksLikeChunkFrame(b: Uint8Array): boolean {
  const n = b[1] ?? 0;
  if (b[0] !== 1 || n === 0 || b.length < 2 + n) return false;
  for (let i = 2; i < 2 + n; i++) {
    if (b[i]! < 0x21 || b[i]! > 0x7e) return false;
  }
  return true;
}

await import("../../shell/server/main.ts");
