// Retry-After that clients can act on (spec 004): the queue's expected drain time,
// depth x recent service time per slot, clamped to [1 s, retryAfterMaxSecs].
// With nothing measured yet, the configured default.
import type { State } from "./state.ts";

/** Requests the provider's non-draining workers take at once, busy or not. */
function slotCapacity(state: State, provider: string): number {
  let slots = 0;
  for (const w of state.workers.values()) {
    if (w.provider === provider && !w.draining) slots += w.maxConcurrent;
  }
  return slots;
}

export function retryAfterSecs(state: State, provider: string): number {
  const depth = state.queues.get(provider)?.length ?? 0;
  const slots = slotCapacity(state, provider);
  if (state.serviceMsAvg === 0 || slots === 0) {
    return state.config.retryAfterSecs;
  }
  const secs = Math.ceil((depth * state.serviceMsAvg) / slots / 1000);
  return Math.min(state.config.retryAfterMaxSecs, Math.max(1, secs));
}
