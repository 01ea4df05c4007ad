// Test-only: one governed operation run through the worker's lifecycle adapter
// straight against a backend, its reports collected; for the adapter's tests
// on the fake backends (shell/worker, mock/) and on a real llama-server (e2e/).
import assert from "node:assert/strict";
import { type Report, runOperation } from "./backends.ts";

/** One report of the lifecycle adapter. */
export type Update = Parameters<Report>[0];

/**
 * Runs `operation` through the adapter against the backend at `url` (a
 * `runner` it was detected as); every report, at least one.
 */
export async function runAdapter(
  url: string,
  runner: Parameters<typeof runOperation>[1],
  operation: Parameters<typeof runOperation>[2],
  params: Record<string, unknown>,
): Promise<Update[]> {
  const updates: Update[] = [];
  await runOperation(
    url,
    runner,
    operation,
    params,
    (u) => updates.push(u),
    new AbortController().signal,
  );
  if (updates.length === 0) throw new Error(`${operation}: no report`);
  return updates;
}

/**
 * `update` is a failure whose error says `why`, and (where given) whose
 * result carries the backend's `status`.
 */
export function assertFailed(update: Update, why: RegExp, status?: number) {
  assert.equal(update.status, "failed");
  if (status !== undefined) assert.deepEqual(update.result, { status });
  assert.match(update.error ?? "", why);
}
