// Worker socket admission (C1, C2, C41): the shell checked the secret in constant
// time (crypto stays in the shell) before completing the WebSocket handshake; the
// core decides. The secret is judged first: a correct secret is always admitted,
// whatever strangers did from the same address (behind a port mapping or a proxy
// every worker and attacker share one), so only failures are throttled, per
// client address, with entries that expire after the window (issue 15).
import type { Effect } from "../effect.ts";
import { recentFailures } from "../state/auth_failures.ts";
import type { State } from "../state/state.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "workerConnectAttempted" }>;

export function recentAuthFailures(state: State, ip: string): number[] {
  return recentFailures(
    state.authFailures,
    ip,
    state.nowMs,
    state.config.authFailureWindowMs,
  );
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
  if (!e.secretValid) {
    // Past the limit the refusal says why and is not counted, so the window
    // does not grow with a flood. The throttle cannot slow guessing (a right
    // guess always gets in): the secret's length does that (the shell warns
    // about short ones).
    if (failures.length >= state.config.authFailuresMax) {
      const secs = Math.ceil(state.config.authFailureWindowMs / 1000);
      return reject(
        `too many failed attempts from this address; retry in ${secs} s`,
        false,
      );
    }
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
