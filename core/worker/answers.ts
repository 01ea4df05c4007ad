// How the worker answers a request, given what the server negotiated (issue 14):
// a body too large for one frame, a request that did not start (backend refused
// the connection, or the worker is draining). Our server (it acked extensions)
// understands scoped `error` frames as "try elsewhere"; the original server
// closes the socket on any `error`, so it gets a plain response_complete.
import {
  answerTooLarge,
  bodyFitsOneFrame,
  errorShapeOf,
  EXTENSION_BODY_CHUNKS,
  frameRoomBytes,
  routeErrorBody,
  type WorkerMessage,
} from "../protocol/mod.ts";
import type { Completion, WorkerState } from "./worker_state.ts";

/** The response_complete carrying `body` for `c`. */
function completeFrame(
  requestId: string,
  c: Completion,
  body: string,
): WorkerMessage {
  const m: WorkerMessage = {
    type: "response_complete",
    request_id: requestId,
    status_code: c.status_code,
    headers: c.headers,
    body,
  };
  // Omitted when unknown, as the original's serde `skip_serializing_if` does;
  // set last, so the frame's fields keep their order.
  if (c.token_counts !== null) m.token_counts = c.token_counts;
  return m;
}

/** The 502 for an answer of `size` that no frame of `max` bytes carries. */
function tooLargeFrame(
  requestId: string,
  endpointPath: string,
  max: number,
  size: string,
): WorkerMessage {
  return {
    type: "response_complete",
    request_id: requestId,
    status_code: 502,
    headers: { "content-type": "application/json" },
    body: routeErrorBody(
      errorShapeOf(endpointPath),
      answerTooLarge(false, {
        limit: max,
        unit: "bytes",
        of: `in one worker frame (the backend's answer is ${size})`,
      }),
    ),
  };
}

/** A server that listed any of our extensions is ours: it reads scoped errors as "retry elsewhere". */
export function serverUnderstandsScopedErrors(state: WorkerState): boolean {
  return state.extensions.length > 0;
}

/**
 * The frames that carry a completion. One `response_complete` when it fits the
 * server's frame limit; else, with body-chunks-v1, `response_chunk` pieces and a
 * `response_complete` with an empty body; else a 502 `response_too_large` (an
 * oversized frame would cost the whole connection, and the request would be
 * requeued only to fail the same way elsewhere).
 */
export function completionFrames(
  state: WorkerState,
  requestId: string,
  endpointPath: string,
  c: Completion,
): WorkerMessage[] {
  const max = state.responseFrameBytesMax;
  // The common answer first: one frame, no closure and no spread made for it
  // (issue 31, third round).
  if (
    c.body_base64 === undefined &&
    bodyFitsOneFrame(c.body, c.headers, requestId, max)
  ) {
    return [completeFrame(requestId, c, c.body)];
  }
  const tooLarge = (size: string): WorkerMessage =>
    tooLargeFrame(requestId, endpointPath, max, size);
  // One rule with the worker shell's (core/protocol/frame_limit.ts), in
  // bytes; the exact room only where bodyFitsOneFrame's bounds do not do.
  const room = () => frameRoomBytes(c.headers, requestId, max);
  // body-bytes-v1 (issue 25): a binary answer in one frame, base64.
  if (c.body_base64 !== undefined) {
    if (c.body_base64.length <= room()) {
      return [{
        type: "response_complete",
        request_id: requestId,
        status_code: c.status_code,
        headers: c.headers,
        body: "",
        body_base64: c.body_base64,
        ...(c.token_counts === null ? {} : { token_counts: c.token_counts }),
      }];
    }
    return [tooLarge(`${c.body_base64.length} base64 characters`)];
  }
  if (!state.extensions.includes(EXTENSION_BODY_CHUNKS)) {
    return [tooLarge(`${c.body.length} characters`)];
  }
  // Pieces sized so that even an all-escaped piece fits a frame: JSON takes
  // at most 6 bytes per UTF-16 unit.
  const piece = Math.max(1, Math.floor(room() / 6));
  const out: WorkerMessage[] = [];
  let i = 0;
  while (i < c.body.length) {
    let end = Math.min(i + piece, c.body.length);
    // Never split a surrogate pair: each frame must be valid UTF-16 (C45).
    const last = c.body.charCodeAt(end - 1);
    if (
      end < c.body.length && end - 1 > i && last >= 0xd800 && last <= 0xdbff
    ) {
      end--;
    }
    out.push({
      type: "response_chunk",
      request_id: requestId,
      chunk: c.body.slice(i, end),
    });
    i = end;
  }
  out.push(completeFrame(requestId, c, ""));
  return out;
}
