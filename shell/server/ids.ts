// Ids are minted in the shell and arrive in events (the core never draws randomness).
import { randomBytes } from "node:crypto";
import type { LifecycleOperation } from "../../core/mod.ts";
export function newRequestId(): string {
  return `req-${crypto.randomUUID()}`;
}

/** Unguessable (96 random bits): polling a task needs no token. */
export function newTaskId(operation: LifecycleOperation): string {
  const prefix = operation === "model-load"
    ? "load"
    : operation === "model-unload"
    ? "unload"
    : "flush";
  return `${prefix}-${randomBytes(12).toString("hex")}`;
}

export function newWorkerId(): string {
  return `w-${crypto.randomUUID().slice(0, 13)}`;
}
