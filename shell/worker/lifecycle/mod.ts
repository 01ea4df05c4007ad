// The worker's lifecycle adapter (issue 9): detects which lifecycle API the
// backend offers (backends.ts), carries operations to it and reads its
// capabilities (capabilities.ts). connection.ts turns its results into events.
import type {
  LifecycleRequestMessage,
  RunnerCapabilities,
} from "../../../core/protocol/mod.ts";
import {
  type BackendKind,
  detectBackend,
  keyedFetch,
  type Report,
  runOperation,
} from "./backends.ts";
import { readCapabilities } from "./capabilities.ts";
import { readResidency } from "./residency.ts";
import type { BackendResidency } from "../../../core/worker/mod.ts";

export type { BackendKind, Report };

export type Lifecycle = {
  capabilities(): Promise<RunnerCapabilities | null>;
  run(request: LifecycleRequestMessage, report: Report): Promise<void>;
  kind(): Promise<BackendKind>;
  /** What the backend holds (issue 30); null when the read failed. */
  residency(): Promise<BackendResidency | null>;
  /**
   * AUTO_LOAD (issue 30): unloads `evict` (when not null), then loads
   * `model`; null when loaded, else why not. Never throws.
   */
  autoLoad(model: string, evict: string | null): Promise<string | null>;
};

export function makeLifecycle(
  base: string,
  apiKey: string | null,
  signal: AbortSignal,
): Lifecycle {
  const call = keyedFetch(apiKey);
  let detected: Promise<BackendKind> | null = null;
  const kind = () => detected ??= detectBackend(base, call);
  return {
    kind,
    async capabilities() {
      const k = await kind();
      const caps = await readCapabilities(base, k, call);
      // Nothing useful, or a backend that may have changed: probe again next time.
      if (caps === null || k === "none") detected = null;
      return caps;
    },
    async residency() {
      const k = await kind();
      const read = await readResidency(base, k, call);
      // Only a failed read probes again: residency is read after every
      // answer, and a plain backend ("none") would get five probes each time
      // (the capabilities timer re-detects it every 5 s anyway).
      if (read === null) detected = null;
      return read;
    },
    async autoLoad(model, evict) {
      const k = await kind();
      const once = async (
        operation: "model-load" | "model-unload",
        modelId: string,
      ): Promise<string | null> => {
        let error: string | null = "no report";
        await runOperation(
          base,
          k,
          operation,
          { modelId },
          (u) => {
            if (u.status === "completed") error = null;
            else if (u.status === "failed") error = u.error ?? "failed";
          },
          signal,
          call,
        );
        return error;
      };
      // An unload that fails (already gone) does not stop the load: the
      // backend answers the load itself when it has no room.
      if (evict !== null) await once("model-unload", evict);
      return await once("model-load", model);
    },
    async run(request, report) {
      const k = await kind();
      await runOperation(
        base,
        k,
        request.operation,
        request.params,
        (u) => {
          if (u.status === "failed") detected = null;
          report(u);
        },
        signal,
        call,
      );
    },
  };
}
