// What the backend holds (issue 30), for the worker core's residency reports:
// Ollama /api/ps, llama-server router GET /models status and spec 004
// capabilities (read through capabilities.ts), llama-swap /running, and a
// single-model llama-server (it holds the one model it serves, and never
// swaps). A plain OpenAI-compatible server says nothing (`loaded` null).
import type { BackendResidency } from "../../../core/worker/mod.ts";
import type { BackendFetch, BackendKind } from "./backends.ts";
import { backendJson, type Json } from "./backend_json.ts";
import { readCapabilities } from "./capabilities.ts";

/**
 * llama-swap's /running: `{"running":[{"model":"a","state":"ready"}]}`;
 * `starting` is loading, `ready` loaded, any other state (stopping) neither.
 */
export function fromLlamaSwapRunning(v: Json): BackendResidency | null {
  if (!Array.isArray(v.running)) return null;
  const loaded: string[] = [];
  const loading: string[] = [];
  for (const m of v.running as Json[]) {
    if (typeof m?.model !== "string") continue;
    if (m.state === "starting") loading.push(m.model);
    else if (m.state === "ready" || m.state === undefined) loaded.push(m.model);
  }
  return { loaded, loading, room: null, swaps: true };
}

/**
 * A router's own /props (checked against the real binary, issue 30):
 * `max_instances` (--models-max; 0 = no limit) is its room, and
 * `models_autoload: false` (--no-models-autoload) means a model must be
 * loaded before a request for it.
 */
async function routerProps(
  call: BackendFetch,
  base: string,
): Promise<Partial<BackendResidency>> {
  const props = await backendJson(call, `${base}/props`);
  const max = props?.max_instances;
  return {
    ...(typeof max === "number" && max > 0 ? { room: max } : {}),
    ...(props?.models_autoload === false ? { explicitLoad: true } : {}),
  };
}

/** Never throws; null when the read failed. */
export async function readResidency(
  base: string,
  kind: BackendKind,
  call: BackendFetch = fetch,
): Promise<BackendResidency | null> {
  switch (kind) {
    case "llama-swap": {
      const v = await backendJson(call, `${base}/running`);
      return v === null ? null : fromLlamaSwapRunning(v);
    }
    case "spec004":
    case "ollama":
    case "llama-router": {
      const caps = await readCapabilities(base, kind, call);
      const models = caps?.models;
      if (models == null) return null;
      return {
        loaded: (models.loaded ?? []).map((m) => m.id),
        loading: (models.loading ?? []).map((m) => m.id),
        room: null,
        swaps: true,
        // A spec 004 runner serves a model only once asked to load it.
        ...(kind === "spec004" ? { explicitLoad: true } : {}),
        ...(kind === "llama-router" ? await routerProps(call, base) : {}),
      };
    }
    case "llama-server": {
      const v = await backendJson(call, `${base}/v1/models`);
      if (v === null || !Array.isArray(v.data)) return null;
      const ids = (v.data as Json[]).map((m) => m?.id).filter((
        id,
      ): id is string => typeof id === "string");
      return { loaded: ids, loading: [], room: null, swaps: false };
    }
    case "none":
      return { loaded: null, loading: [], room: null, swaps: false };
  }
}
