// answerBytesCounted (C170, C172, issue 33.3): the bytes of an answer handed
// to the shell stay in MAX_BUFFERED_RESPONSE_BYTES until its client has taken
// them or its connection is gone (the client's own `responseProgress` and
// `responseSent`), and the budget's sums agree: the fleet's count is its
// tenants' and the pieces kept plus the hand-overs, each tenant within its
// share. The observer follows what each virtual client still holds.
import type { Effect, Event, State } from "../../core/mod.ts";
import { tenantBufferBytesMax } from "../../core/state/body_budget.ts";
import type { Check } from "./catalog.ts";

/** Request id -> bytes of its handed-over answer its client has not taken. */
export type Held = Map<string, { total: number; left: number }>;

/** A `respond` with pieces: its client holds their bytes. */
export function handedOver(
  held: Held,
  f: Extract<Effect, { kind: "respond" }>,
): void {
  if (f.bodyPieces === undefined) return;
  const total = f.bodyPieces.reduce((n, p) => n + p.length, 0);
  if (total > 0) held.set(f.requestId, { total, left: total });
}

/** What the client reports, before the core hears it. */
export function clientReported(held: Held, e: Event): void {
  if (e.kind === "responseSent") held.delete(e.requestId);
  if (e.kind !== "responseProgress") return;
  const h = held.get(e.requestId);
  if (h !== undefined) h.left = Math.max(0, h.total - e.written);
}

/** After each step: nothing held is out of the budget, and its sums agree. */
export function countedWhileHeld(check: Check, held: Held, state: State): void {
  let stillHeld = 0;
  for (const h of held.values()) stillHeld += h.left;
  let kept = 0;
  for (const r of state.requests.values()) kept += r.bodyBytes;
  let sending = 0;
  for (const s of state.bodiesSending.values()) sending += s.bytes;
  let tenants = 0;
  let overShare: string | null = null;
  const share = tenantBufferBytesMax(state.config);
  for (const [tenant, bytes] of state.bodyBytesByTenant) {
    tenants += bytes;
    if (bytes > share) overShare = tenant;
  }
  check(
    state.bodyBytesBuffered >= stillHeld &&
      state.bodyBytesBuffered === kept + sending &&
      state.bodyBytesBuffered === tenants && overShare === null &&
      state.bodyBytesBuffered <= state.config.responseBufferBytesMax,
    "answerBytesCounted",
    () =>
      `budget counts ${state.bodyBytesBuffered} bytes (pieces ${kept}, handed over ${sending}, by tenant ${tenants}${
        overShare === null ? "" : `, tenant ${overShare} over its share`
      }) while clients still hold ${stillHeld}`,
  );
}
