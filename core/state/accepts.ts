// Which of a model's workers may take a request (issue 25): the model names the
// candidates (routing.ts), and among them a worker's `endpoint_prefixes` must
// match the request's path, and a body that is not text needs a worker that
// negotiated body-bytes-v1 (an original worker's `request` frame carries text).
import { EXTENSION_BODY_BYTES } from "../protocol/messages.ts";
import type { Request, State, Worker } from "./state.ts";

/** What a request asks of its worker besides the model. */
export type Need = { path: string; binary: boolean };

export function needOf(request: Request): Need {
  return { path: request.endpointPath, binary: request.bodyBase64 };
}

/** Prefixes kept per worker, and the longest one (C4-style bounds). */
const PREFIXES_MAX = 64;
const PREFIX_CHARS_MAX = 256;

/** Trimmed, empty and duplicate prefixes dropped, bounded; empty = every path. */
export function sanitizePrefixes(prefixes: readonly string[]): string[] {
  const out: string[] = [];
  for (const raw of prefixes) {
    const p = raw.trim();
    if (p === "" || p.length > PREFIX_CHARS_MAX || out.includes(p)) continue;
    out.push(p);
    if (out.length === PREFIXES_MAX) break;
  }
  return out;
}

export function acceptsPath(worker: Worker, path: string): boolean {
  const prefixes = worker.endpointPrefixes;
  if (prefixes.length === 0) return true;
  for (const p of prefixes) if (path.startsWith(p)) return true;
  return false;
}

export function carriesBody(worker: Worker, binary: boolean): boolean {
  return !binary || worker.extensions.includes(EXTENSION_BODY_BYTES);
}

/** Whether `worker` may take a request with this need (its model is checked elsewhere). */
export function workerAccepts(worker: Worker, need: Need | null): boolean {
  if (need === null) return true;
  return acceptsPath(worker, need.path) && carriesBody(worker, need.binary);
}

/**
 * Whether a connected worker (draining included) that serves the model could
 * take the request: `ok`, or why not: no worker serves the path (`path`), or
 * the ones that do cannot carry its body (`body`).
 */
export function servedFor(
  state: State,
  provider: string,
  model: string,
  need: Need,
): "ok" | "path" | "body" {
  // Issue 31: a loop per index, no closure per request.
  const named = lookAt(state, state.modelIndex.get(provider)?.get(model), need);
  if (named === "ok") return "ok";
  const any = lookAt(state, state.wildcardIndex.get(provider), need);
  if (any === "ok") return "ok";
  return named === "body" || any === "body" ? "body" : "path";
}

/** `servedFor` over one index's workers: `body` = some took the path, none the body. */
function lookAt(
  state: State,
  ids: Iterable<string> | undefined,
  need: Need,
): "ok" | "path" | "body" {
  if (ids === undefined) return "path";
  let pathOk = false;
  for (const id of ids) {
    const w = state.workers.get(id);
    if (w === undefined || !acceptsPath(w, need.path)) continue;
    pathOk = true;
    if (carriesBody(w, need.binary)) return "ok";
  }
  return pathOk ? "body" : "path";
}
