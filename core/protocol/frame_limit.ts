// The largest frame either side of the protocol sends or takes: 16 MiB, the
// original server's (its WebSocket library's default, counted in bytes) and
// our server's default (counted in characters, `frameCharsMax`). Written once:
// the server's default (core/config.ts), the worker core's frame room
// (core/worker/worker_state.ts) and the worker shell's buffered-answer bound
// (shell/worker/answer_readers.ts) all read it.
export const PROTOCOL_FRAME_MAX = 16 * 1024 * 1024;
