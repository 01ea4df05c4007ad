// One dispatch from the queue as the scheduling checks see it (spec 004): the
// request `r` that went, and which classes and tenants still had a
// dispatchable request waiting at that moment (tenant -> its oldest request).
import type { Model, MReq, Readiness } from "../model/model.ts";
import type { Check } from "./catalog.ts";

export interface Scheduled extends Readiness {
  readonly m: Model;
  readonly check: Check;
  readonly r: MReq;
}
