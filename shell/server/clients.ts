// Open client responses by request id: what the effects write to.
import type { ServerResponse } from "node:http";
import type { ClientApi } from "../../core/mod.ts";

export type ClientContext = {
  res: ServerResponse;
  api: ClientApi;
  /** Set once the core ended the request, so a later socket close is not a cancel. */
  ended: boolean;
  stalled: boolean;
};

export type Clients = Map<string, ClientContext>;
