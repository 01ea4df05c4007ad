// The budget of non-streaming answer bytes the relay holds (issue 24, issue
// 33.3): MAX_BUFFERED_RESPONSE_BYTES for all requests together and
// TENANT_MAX_BUFFERED_RESPONSE_BYTES for one tenant's. Bytes count from the
// piece that brings them until the shell says it let them go: written to the
// client's socket (`responseProgress`, `responseSent`) or dropped with the
// connection. An answer whose client makes no write progress for
// CLIENT_WRITE_TIMEOUT_SECS is cut (`cutResponse`); its bytes leave the budget
// when the shell reports them gone, never on a timer alone while a live shell
// may still hold them.
import type { Effect } from "../effect.ts";
import type { Config } from "../config.ts";
import type { RequestId } from "../vocabulary.ts";
import type { Request, State } from "./state.ts";

/** What one tenant's answers may hold: its setting, else half the fleet's budget. */
export function tenantBufferBytesMax(config: Config): number {
  return config.tenantResponseBufferBytesMax ??
    Math.floor(config.responseBufferBytesMax / 2);
}

/** Which budget a piece of `bytes` for `request` would go past, or null if it fits. */
export function budgetExceeded(
  state: State,
  request: Request,
  bytes: number,
): "fleet" | "tenant" | null {
  if (state.bodyBytesBuffered + bytes > state.config.responseBufferBytesMax) {
    return "fleet";
  }
  const tenant = state.bodyBytesByTenant.get(request.tenant) ?? 0;
  if (tenant + bytes > tenantBufferBytesMax(state.config)) return "tenant";
  return null;
}

/** A piece kept for `request`: its bytes join both budgets. */
export function countBodyPiece(
  state: State,
  request: Request,
  piece: Uint8Array,
): void {
  request.bodyPieces.push(piece);
  request.bodyBytes += piece.length;
  addBytes(state, request.tenant, piece.length);
}

function addBytes(state: State, tenant: string, bytes: number): void {
  if (bytes === 0) return;
  state.bodyBytesBuffered += bytes;
  const left = (state.bodyBytesByTenant.get(tenant) ?? 0) + bytes;
  if (left === 0) state.bodyBytesByTenant.delete(tenant);
  else state.bodyBytesByTenant.set(tenant, left);
}

/** Forgets a request's body pieces and gives their bytes back to the budget (issue 24). */
export function dropBodyPieces(state: State, request: Request): void {
  addBytes(state, request.tenant, -request.bodyBytes);
  request.bodyPieces = [];
  request.bodyBytes = 0;
}

/**
 * The request's pieces go to the shell in a `respond`: their bytes stay
 * counted until the shell says it let them go.
 */
export function handOverBodyPieces(state: State, request: Request): void {
  if (request.bodyBytes === 0) return;
  state.bodiesSending.set(request.id, {
    tenant: request.tenant,
    bytes: request.bodyBytes,
    written: 0,
    progressAtMs: state.nowMs,
    cutAtMs: null,
  });
  request.bodyPieces = [];
  request.bodyBytes = 0;
}

/**
 * The shell wrote `written` bytes of a handed-over answer's pieces so far (it
 * no longer holds them): they leave the budget, and the write deadline starts
 * again.
 */
export function bodyProgress(
  state: State,
  requestId: RequestId,
  written: number,
): void {
  const s = state.bodiesSending.get(requestId);
  if (s === undefined || written <= s.written) return;
  const released = Math.min(written - s.written, s.bytes);
  s.written = written;
  s.bytes -= released;
  s.progressAtMs = state.nowMs;
  addBytes(state, s.tenant, -released);
}

/** A handed-over answer is written out, or its connection is gone: the rest of its bytes leave the budget. */
export function bodySent(state: State, requestId: RequestId): void {
  const s = state.bodiesSending.get(requestId);
  if (s === undefined) return;
  state.bodiesSending.delete(requestId);
  addBytes(state, s.tenant, -s.bytes);
}

/**
 * Ticks: an answer with no write progress for `clientWriteTimeoutMs` is cut.
 * A shell told to cut answers at once (the connection's close is its
 * `responseSent`); one that has not said a whole deadline after the cut holds
 * nothing any more (a cluster instance that died, a client gone before its
 * answer came), so its bytes are released then.
 */
export function watchBodiesSending(state: State, out: Effect[]): void {
  const deadline = state.config.clientWriteTimeoutMs;
  for (const [id, s] of state.bodiesSending) {
    if (s.cutAtMs !== null) {
      if (state.nowMs - s.cutAtMs >= deadline) bodySent(state, id);
      continue;
    }
    if (state.nowMs - s.progressAtMs < deadline) continue;
    s.cutAtMs = state.nowMs;
    out.push({ kind: "cutResponse", requestId: id });
    out.push({
      kind: "log",
      level: "warn",
      message: "client not reading its answer, connection cut",
      fields: {
        request_id: id,
        tenant: s.tenant,
        unsent_bytes: s.bytes,
        idle_ms: state.nowMs - s.progressAtMs,
      },
    });
  }
}
