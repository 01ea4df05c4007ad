// What a model load's poll means (issue 27): the worker polls a backend that
// loads in the background (a spec 004 runner's load task, a llama-server
// router's model list) every LOAD_POLL_MS, and each answer is read here, with
// how long the load has run. The shell only fetches, waits and reports.
import { MODEL_LOAD_MS_MAX } from "../config.ts";

/** How often a load in progress is polled. */
export const LOAD_POLL_MS = 250;

/**
 * A router that still lists the model as "unloaded" this long after it took
 * the load did not start it (a router answers the load at once and marks the
 * model "loading" as it begins), so the load counts as failed.
 */
export const UNLOADED_GIVE_UP_MS = 5_000;

export type LoadPoll =
  | { kind: "loaded" }
  | { kind: "failed"; error: string }
  /** Still loading: report progress, poll again after LOAD_POLL_MS. */
  | { kind: "running" };

/** A load that has not finished in MODEL_LOAD_MS_MAX fails: the server's task gives up then too. */
export function loadTimedOut(elapsedMs: number): LoadPoll | null {
  return elapsedMs < MODEL_LOAD_MS_MAX
    ? null
    : { kind: "failed", error: "the load did not finish in time" };
}

/** A spec 004 runner's load task (GET /v1/models/load/{taskId}). */
export function spec004LoadPoll(
  status: unknown,
  error: unknown,
  elapsedMs: number,
): LoadPoll {
  if (status === "completed") return { kind: "loaded" };
  if (status === "failed") {
    return {
      kind: "failed",
      error: String(error ?? "the runner reported a failure"),
    };
  }
  return loadTimedOut(elapsedMs) ?? { kind: "running" };
}

/** A llama-server router's status for the model (GET /models). */
export function routerLoadPoll(
  modelId: string,
  status: unknown,
  elapsedMs: number,
): LoadPoll {
  if (status === "loaded") return { kind: "loaded" };
  if (
    status === "failed" ||
    status === "unloaded" && elapsedMs > UNLOADED_GIVE_UP_MS
  ) {
    return {
      kind: "failed",
      error: `llama-server reports model "${modelId}" as ${status}`,
    };
  }
  return loadTimedOut(elapsedMs) ?? { kind: "running" };
}
