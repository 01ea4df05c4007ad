// stream-head-v1 (issue 25): what our worker tells the server about a streamed
// answer before its first chunk. A stream of server-sent events needs nothing
// (the server's own SSE head is right for it, and chat streams stay one frame
// per chunk, no more); any other content type (NDJSON, audio, plain text)
// would reach the client labelled as SSE, so its head goes first: the
// backend's status and headers, once per stream.
import { EXTENSION_STREAM_HEAD } from "../protocol/messages.ts";
import { isEventStream } from "../protocol/sse_events.ts";
import type { WorkerAction, WorkerState } from "./worker_state.ts";
import { send } from "./worker_actions.ts";

/** Whether a stream with this content type needs its head sent (pure). */
export function streamNeedsHead(contentType: string | undefined): boolean {
  // Absent: the server's SSE head, as before (an unlabelled stream is the
  // original dialect's and the mocks' SSE).
  return contentType !== undefined && !isEventStream(contentType);
}

/** The frames for a streamed answer's head: one response_head, or none. */
export function streamHeadActions(
  state: WorkerState,
  requestId: string,
  status: number,
  headers: Record<string, string>,
): WorkerAction[] {
  if (
    !state.inFlight.has(requestId) ||
    !state.extensions.includes(EXTENSION_STREAM_HEAD) ||
    !streamNeedsHead(headers["content-type"])
  ) return [];
  return [send({
    type: "response_head",
    request_id: requestId,
    status_code: status,
    headers,
  })];
}
