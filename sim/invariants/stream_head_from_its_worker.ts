// streamHeadFromItsWorker (C108, issue 25): a stream opened with a head
// (stream-head-v1) opens with the head its committing worker sent for it in
// this dispatch, and a stream whose worker sent one never opens without it:
// a requeued request never carries an earlier worker's head.
import type { StreamHead } from "../../core/vocabulary.ts";
import type { MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

export function opensWithItsHead(
  check: Check,
  r: MReq,
  head: StreamHead | undefined,
): void {
  const want = r.head;
  const same = want === undefined
    ? head === undefined
    : head !== undefined && head.status === want.status &&
      JSON.stringify(head.headers) === JSON.stringify(want.headers);
  check(
    same,
    "streamHeadFromItsWorker",
    () =>
      `${r.id} (worker ${r.conn}) opened with head ${
        JSON.stringify(head)
      }, its worker sent ${JSON.stringify(want)}`,
  );
}
