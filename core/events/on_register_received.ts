// Registration (C3, C4, C5, C39): sanitize what the worker advertised, answer
// register_ack with the accepted models and every change as a warning, then give
// it queued work (C10).
import type { Effect } from "../effect.ts";
import {
  ACCEPTED_PROTOCOL_VERSIONS,
  SUPPORTED_EXTENSIONS,
} from "../protocol/messages.ts";
import { sanitizePrefixes } from "../state/accepts.ts";
import { closeAndDrop } from "../state/drop_worker.ts";
import { pumpQueue } from "../state/requests.ts";
import type { State, Worker } from "../state/state.ts";
import {
  indexWorker,
  sanitizeMaxConcurrent,
  sanitizeModels,
  sanitizeWorkerName,
  WILDCARD_MODEL,
} from "../state/workers.ts";
import type { Event } from "./event.ts";

type E = Extract<Event, { kind: "registerReceived" }>;

function protocolError(
  state: State,
  e: E,
  reason: string,
  out: Effect[],
): void {
  const worker = state.workers.get(e.workerId);
  state.pending.delete(e.workerId);
  out.push({
    kind: "log",
    level: "warn",
    message: "protocol error",
    fields: { worker_id: e.workerId, reason },
  });
  if (worker !== undefined) closeAndDrop(state, worker, 1002, reason, out);
  else {out.push({
      kind: "closeWorker",
      workerId: e.workerId,
      code: 1002,
      reason,
    });}
}

export function versionProblem(
  state: State,
  version: string | null,
): string | null {
  const accepted = ACCEPTED_PROTOCOL_VERSIONS.map((v) => `"${v}"`).join(" or ");
  if (version === null) {
    return state.config.requireProtocolVersion
      ? `protocol_version is required (this server accepts ${accepted})`
      : null;
  }
  if (ACCEPTED_PROTOCOL_VERSIONS.includes(version)) return null;
  return `unsupported protocol_version "${version}": this server accepts ${accepted} or none`;
}

export function onRegisterReceived(state: State, e: E, out: Effect[]): void {
  const pending = state.pending.get(e.workerId);
  if (pending === undefined) {
    if (state.workers.has(e.workerId)) {
      protocolError(state, e, "register sent twice on one connection", out);
    }
    return;
  }
  const problem = versionProblem(state, e.protocolVersion);
  if (problem !== null) return protocolError(state, e, problem, out);

  const models = sanitizeModels(e.models, state.config);
  const name = sanitizeWorkerName(e.workerName, state.config);
  const maxConcurrent = sanitizeMaxConcurrent(e.maxConcurrent, state.config);
  const warnings = [
    ...models.warnings,
    ...name.warnings,
    ...maxConcurrent.warnings,
  ];
  state.pending.delete(e.workerId);
  const worker: Worker = {
    id: e.workerId,
    provider: pending.provider,
    name: name.value,
    models: models.value,
    modelSet: new Set(models.value.filter((m) => m !== WILDCARD_MODEL)),
    wildcard: models.value.includes(WILDCARD_MODEL),
    maxConcurrent: maxConcurrent.value,
    reportedLoad: e.currentLoad,
    inFlight: new Set(),
    cancelling: new Map(),
    draining: false,
    selfDraining: false,
    drainDeadlineAtMs: null,
    backend: { kind: "closed", failures: 0 },
    connectedAtMs: pending.connectedAtMs,
    lastHeartbeatAtMs: state.nowMs,
    nextPingAtMs: state.nowMs + state.config.heartbeatIntervalMs,
    lastDispatchSeq: 0,
    routeLevel: null,
    protocolVersion: e.protocolVersion,
    extensions: SUPPORTED_EXTENSIONS.filter((x) =>
      e.extensions?.includes(x) === true
    ),
    capabilities: null,
    capabilitiesAtMs: null,
    endpointPrefixes: sanitizePrefixes(e.endpointPrefixes ?? []),
    residency: null,
  };
  state.workers.set(worker.id, worker);
  indexWorker(state, worker);
  out.push({
    kind: "sendToWorker",
    workerId: worker.id,
    message: {
      type: "register_ack",
      worker_id: worker.id,
      models: worker.models,
      warnings,
      ...(e.protocolVersion === null
        ? {}
        : { protocol_version: e.protocolVersion }),
      // Only to a worker that listed extensions: the original sees the same ack as before.
      ...(e.extensions === undefined
        ? {}
        : { extensions: [...SUPPORTED_EXTENSIONS] }),
      // The original's newer field, echoed only to a worker that sent it.
      ...(e.endpointPrefixes === undefined
        ? {}
        : { endpoint_prefixes: worker.endpointPrefixes }),
    },
  });
  out.push({
    kind: "log",
    level: "info",
    message: "worker registered",
    fields: {
      worker_id: worker.id,
      worker_name: worker.name,
      models: worker.models.join(","),
      max_concurrent: worker.maxConcurrent,
      warnings: warnings.length,
    },
  });
  pumpQueue(state, worker.provider, out);
}
