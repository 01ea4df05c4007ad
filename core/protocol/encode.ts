import type { ServerMessage, WorkerMessage } from "./messages.ts";

/**
 * Encodes a frame for the wire. Optional fields left `undefined` are omitted, which
 * is how the original's serde `skip_serializing_if` writes them.
 */
export function encodeFrame(message: ServerMessage | WorkerMessage): string {
  return JSON.stringify(message);
}
