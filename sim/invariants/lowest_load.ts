// lowestLoad (C8): the least-loaded worker wins, ties round-robin (the one
// waiting longest at that load level goes first).
import type { MWorker } from "../model/model.ts";
import type { Dispatch } from "./dispatch.ts";

/**
 * `x` is another worker free for the request (load `xHi` at most): the chosen
 * `w` (load `myLo` at least) must not be certainly busier, nor, at a settled
 * tie, have waited at that level less long. Order among workers that changed
 * level within this very step is not observable here.
 */
export function noLessLoaded(
  { m, check, id, conn, w }: Dispatch,
  myLo: number,
  x: MWorker,
  xHi: number,
): void {
  const settled = x.levelSeq <= m.stepLevelSeq &&
    w.levelSeq <= m.stepLevelSeq &&
    xHi === m.load(x, false) && m.load(w, true) === myLo;
  check(
    !(xHi < myLo || (settled && xHi === myLo && x.levelSeq < w.levelSeq)),
    "lowestLoad",
    () =>
      `${id} went to ${conn} (load ${myLo}, at that level since #${w.levelSeq}) over ${x.conn} (load ${xHi}, since #${x.levelSeq})`,
  );
}
