// wholeSseEvents (C60, issue 24.1): a stream never carries a partial event
// followed by another event. No chunk starts a new event while the stream so
// far ends inside one, and a stream from our worker (which holds back an
// unfinished event, shell/worker/answer_readers.ts) never breaks mid-event, so
// the server's error event starts a fresh event. An original worker's stream
// that breaks mid-event has its client connection cut by the server's shell
// instead (shell/server/run_effects.ts; shell/server/stream_break_test.ts).
import { endsOnEventBoundary } from "../../core/protocol/sse_events.ts";
import type { MReq, MWorker } from "../model/model.ts";
import type { Check } from "./catalog.ts";

const EVENT_START = /^(?:data|event|id|retry):/;

/** A chunk written while the stream ends inside an event continues that event. */
export function noEventAfterPartial(check: Check, r: MReq, text: string): void {
  check(
    !(r.midEvent && EVENT_START.test(text)),
    "wholeSseEvents",
    () =>
      `${r.id}: a new event ${
        JSON.stringify(text.slice(0, 40))
      } was written after a partial event`,
  );
}

/** The stream's state after `text` was written to it. */
export function afterChunk(r: MReq, text: string): void {
  if (text.length > 0) r.midEvent = !endsOnEventBoundary(text);
}

/** Our worker's stream breaks between events: the error event starts fresh. */
export function breaksBetweenEvents(
  check: Check,
  r: MReq,
  w: MWorker | undefined,
  error: unknown,
): void {
  const ours = w !== undefined && w.listed !== null && w.listed !== undefined;
  check(
    error === null || !ours || !r.midEvent,
    "wholeSseEvents",
    () =>
      `${r.id}: the stream from ${r.conn} broke inside an event, so its error event would be glued onto it`,
  );
}
