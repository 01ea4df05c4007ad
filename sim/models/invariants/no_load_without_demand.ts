// noLoadWithoutDemand (issue 30.2): a model starts loading only for a request
// that needs it. Every load the core starts names a request it sent, in that
// step, to that worker, for that model, and still live (the virtual backend,
// like a real one, loads only for a request it received).
import type { Effect, State } from "../../../core/mod.ts";

export function noLoadWithoutDemand(
  state: State,
  effects: Effect[],
): string | null {
  const sent = new Map<string, { workerId: string; model: string }>();
  for (const f of effects) {
    if (f.kind === "sendToWorker" && f.message.type === "request") {
      sent.set(f.message.request_id, {
        workerId: f.workerId,
        model: f.message.model,
      });
    }
  }
  for (const f of effects) {
    if (f.kind !== "modelLoadStarted" || f.reason !== "demand") continue;
    const id = f.triggeredBy;
    const r = id === null ? undefined : state.requests.get(id);
    const to = id === null ? undefined : sent.get(id);
    if (
      r === undefined || to === undefined || to.workerId !== f.workerId ||
      to.model !== f.model || r.model !== f.model
    ) {
      return `${f.model} started loading on ${f.workerId} for ${id}, which is no live request for it sent there in this step`;
    }
  }
  return null;
}
