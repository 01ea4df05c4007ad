// Worker socket admission (C1, C2, C41): the shell checked the secret in constant
// time; the core decides, and rate-limits failed attempts per client IP with
// entries that expire after the window.
import type { Effect } from "../effect.ts";
import type { State } from "../state/state.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "workerConnectAttempted" }>;

export function recentAuthFailures(state: State, ip: string): number[] {
  const since = state.nowMs - state.config.authFailureWindowMs;
  const times = (state.authFailures.get(ip) ?? []).filter((t) => t > since);
  if (times.length === 0) state.authFailures.delete(ip);
  else state.authFailures.set(ip, times);
  return times;
}

export function onWorkerConnectAttempted(
  state: State,
  e: E,
  out: Effect[],
): void {
  const failures = recentAuthFailures(state, e.clientIp);
  const reject = (reason: string, counts: boolean) => {
    if (counts) state.authFailures.set(e.clientIp, [...failures, state.nowMs]);
    out.push({
      kind: "rejectWorker",
      workerId: e.workerId,
      code: 1008,
      reason,
    });
    out.push({
      kind: "log",
      level: "warn",
      message: "worker connection refused",
      fields: { worker_id: e.workerId, client_ip: e.clientIp, reason },
    });
  };
  if (failures.length >= state.config.authFailuresMax) {
    const secs = Math.ceil(state.config.authFailureWindowMs / 1000);
    return reject(
      `too many failed attempts from this address; retry in ${secs} s`,
      false,
    );
  }
  if (!e.secretValid) {
    return reject(
      "invalid worker secret: set WORKER_SECRET to the server's value",
      true,
    );
  }
  const provider = state.config.providers.find((p) => p.name === e.provider);
  if (provider === undefined) {
    const known = state.config.providers.map((p) => p.name).join(", ");
    return reject(
      `unknown provider "${e.provider}" (this server has: ${known})`,
      true,
    );
  }
  if (!provider.enabled) return reject("Provider is currently disabled", false);
  if (state.shuttingDown) {
    out.push({
      kind: "rejectWorker",
      workerId: e.workerId,
      code: 1001,
      reason: "server shutting down",
    });
    return;
  }
  state.pending.set(e.workerId, {
    id: e.workerId,
    provider: provider.name,
    connectedAtMs: state.nowMs,
    registerDeadlineAtMs: state.nowMs + state.config.registerTimeoutMs,
  });
  out.push({ kind: "acceptWorker", workerId: e.workerId });
}
