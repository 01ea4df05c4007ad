// The shell's one clock: monotonic milliseconds since start. Nothing else in the
// shell keeps time; deadlines live in the core and are checked on `tick`.
const origin = performance.now();

export function nowMs(): number {
  return Math.floor(performance.now() - origin);
}
