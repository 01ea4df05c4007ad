// observerAgrees (C34): the core and this simpler model agree on which requests
// are open and queued, and on whose they were.
import { queueDepth, type State } from "../../core/mod.ts";
import type { Ended, Model } from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** requestFinished names the tenant the request arrived with. */
export function finishedTenantAgrees(
  check: Check,
  id: string,
  tenant: string,
  endedAs: Ended | undefined,
): void {
  check(
    endedAs === undefined || endedAs.tenant === tenant,
    "observerAgrees",
    () =>
      `requestFinished for ${id} names tenant "${tenant}", the request was "${endedAs?.tenant}"`,
  );
}

/** After each step: the same number of open and of queued requests. */
export function countsAgree(m: Model, check: Check, state: State): void {
  check(
    state.requests.size === m.reqs.size &&
      queueDepth(state) === m.queued,
    "observerAgrees",
    () =>
      `core has ${state.requests.size} open / ${
        queueDepth(state)
      } queued, observer ${m.reqs.size} / ${m.queued}`,
  );
}
