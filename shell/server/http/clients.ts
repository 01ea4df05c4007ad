// Open client responses by request id, and lifecycle calls by task id: what the
// effects write to.
import type { HttpResponse } from "../door/exchange.ts";
import type { ClientApi } from "../../../core/mod.ts";

export type ClientContext = {
  res: HttpResponse;
  api: ClientApi;
  /** Set once the core ended the request, so a later socket close is not a cancel. */
  ended: boolean;
  stalled: boolean;
  /**
   * The stream's bytes so far end inside an SSE event (C60: only an
   * original-dialect worker forwards half an event; ours hold it back).
   */
  midEvent?: boolean;
  /**
   * The stream went out with the backend's head and is not server-sent
   * events (stream-head-v1, issue 25): an SSE error event cannot be appended.
   */
  rawStream?: boolean;
};

export type Clients = Map<string, ClientContext>;

/** Lifecycle calls owed an answer (a `replyLifecycle` effect), by task id. */
export type LifecycleCallers = Map<string, HttpResponse>;
