// One dispatch as the observer checks it: the request `r` (id `id`) sent to
// the registered worker `w` on connection `conn`. Every per-dispatch check
// reads from this one record rather than six loose parameters.
import type { Model, MReq, MWorker } from "../model/model.ts";
import type { Check } from "./catalog.ts";

export interface Dispatch {
  readonly m: Model;
  readonly check: Check;
  readonly id: string;
  readonly conn: string;
  readonly r: MReq;
  readonly w: MWorker;
}
