// The backend's spec 004 capabilities: its own GET /v1/capabilities when it has
// one, else derived from what it does offer (Ollama /api/ps and /api/tags,
// llama-server /props and /slots, llama-server router mode /models with each
// model's status, and /v1/models for everything).
import type { RunnerCapabilities } from "../../../core/protocol/mod.ts";
import { runnerCapabilitiesSchema } from "../../../core/protocol/mod.ts";
import type { BackendFetch, BackendKind } from "./backends.ts";
import { backendJson, type Json } from "./backend_json.ts";

function ids(list: unknown, key = "id"): string[] {
  if (!Array.isArray(list)) return [];
  return list.map((m) => (m as Json)?.[key]).filter((x): x is string =>
    typeof x === "string"
  );
}

/** Never throws; null when the backend answers nothing useful. */
export async function readCapabilities(
  base: string,
  kind: BackendKind,
  call: BackendFetch = fetch,
): Promise<RunnerCapabilities | null> {
  if (kind === "spec004") {
    const own = await backendJson(call, `${base}/v1/capabilities`);
    const parsed = runnerCapabilitiesSchema.safeParse(own);
    if (parsed.success) return parsed.data;
  }
  const health = "healthy";
  if (kind === "ollama") {
    const ps = await backendJson(call, `${base}/api/ps`);
    const tags = await backendJson(call, `${base}/api/tags`);
    if (ps === null && tags === null) return null;
    const loaded = Array.isArray(ps?.models)
      ? (ps.models as Json[]).map((m) => ({
        id: String(m.name ?? m.model ?? ""),
        ...(typeof m.size_vram === "number"
          ? { gpuMemoryMB: Math.round(m.size_vram / 1048576) }
          : {}),
        ...(typeof m.context_length === "number"
          ? { contextLength: m.context_length }
          : {}),
      }))
      : [];
    const vram = loaded.reduce((a, m) => a + (m.gpuMemoryMB ?? 0), 0);
    return {
      runnerType: "ollama",
      models: {
        loaded,
        loading: [],
        available: ids(tags?.models, "name"),
      },
      ...(vram > 0 ? { resources: { gpuMemoryUsedMB: vram } } : {}),
      capabilities: { streaming: true, functionCalling: true },
      health,
    };
  }
  if (kind === "llama-router") {
    return await routerCapabilities(call, base, health);
  }
  const models = await backendJson(call, `${base}/v1/models`);
  if (models === null) return null;
  const listed = ids(models.data);
  const out: RunnerCapabilities = {
    runnerType: kind === "none" ? "openai-compatible" : kind,
    models: {
      loaded: listed.map((id) => ({ id })),
      loading: [],
      available: [],
    },
    capabilities: { streaming: true },
    health,
  };
  // llama-server: context length from /props, slot use from /slots.
  const props = await backendJson(call, `${base}/props`);
  const settings = props?.default_generation_settings as Json | undefined;
  const nCtx = settings?.n_ctx ?? props?.n_ctx;
  if (typeof nCtx === "number" && out.models?.loaded?.length === 1) {
    out.models.loaded[0]!.contextLength = nCtx;
    out.runnerType = "llama-server";
  }
  // llama-server: input modalities, and tool calls as its chat template allows.
  const modalities = props?.modalities as Json | undefined;
  if (typeof modalities?.vision === "boolean") {
    out.capabilities!.visionInput = modalities.vision;
  }
  if (typeof modalities?.audio === "boolean") {
    out.capabilities!.audioInput = modalities.audio;
  }
  const template = props?.chat_template_caps as Json | undefined;
  if (typeof template?.supports_tool_calls === "boolean") {
    out.capabilities!.functionCalling = template.supports_tool_calls;
  }
  const slots = await call(`${base}/slots`, {
    signal: AbortSignal.timeout(3_000),
  }).then((r) => r.ok ? r.json() : (r.body?.cancel(), null)).catch(() => null);
  if (Array.isArray(slots)) {
    const busy = slots.filter((s) =>
      (s as Json)?.is_processing === true
    ).length;
    out.queue = { depth: busy, maxDepth: slots.length };
  }
  return out;
}

/**
 * llama-server in router mode lists every model it can run, each with a status
 * (checked against the real binary, issue 14): only "loaded" ones are loaded
 * (context length from `/props?model=`), "loading" ones are loading, the rest
 * available. Its own /props describes the router (n_ctx 0), not a model.
 */
async function routerCapabilities(
  call: BackendFetch,
  base: string,
  health: string,
): Promise<RunnerCapabilities | null> {
  const list = await backendJson(call, `${base}/models`);
  if (list === null || !Array.isArray(list.data)) return null;
  const byStatus = new Map<string, string[]>();
  for (const m of list.data as Json[]) {
    if (typeof m?.id !== "string") continue;
    const st = m.status as Json | string | undefined;
    const value = typeof st === "string" ? st : String(st?.value ?? "");
    byStatus.set(value, [...byStatus.get(value) ?? [], m.id]);
  }
  const loaded = await Promise.all(
    (byStatus.get("loaded") ?? []).map(async (id) => {
      const props = await backendJson(
        call,
        `${base}/props?model=${encodeURIComponent(id)}`,
      );
      const nCtx = (props?.default_generation_settings as Json | undefined)
        ?.n_ctx;
      return typeof nCtx === "number" && nCtx > 0
        ? { id, contextLength: nCtx }
        : { id };
    }),
  );
  return {
    runnerType: "llama-router",
    models: {
      loaded,
      loading: (byStatus.get("loading") ?? []).map((id) => ({ id })),
      available: [...byStatus]
        .filter(([st]) => st !== "loaded" && st !== "loading")
        .flatMap(([, ids]) => ids),
    },
    capabilities: { streaming: true },
    health,
  };
}
