// neverRunTwiceForSize (issue 14.2): a request never runs twice because of its
// own answer's size (running it again would outgrow the limit again).
import type { MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

export function notRedispatchedWhenTooLarge(
  check: Check,
  id: string,
  r: MReq,
): void {
  check(
    !r.tooLarge,
    "neverRunTwiceForSize",
    () => `${id} dispatched again after its answer outgrew the frame limit`,
  );
}
