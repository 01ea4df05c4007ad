// The only import surface of the core for shell/, sim/ and bench/.
export { reduce, type Reduced } from "./reduce.ts";
export {
  type Config,
  DEFAULT_CONFIG,
  type KeyRef,
  makeConfig,
  MODEL_LOAD_MS_MAX,
  type ProviderConfig,
  type RateLimit,
  type TokenLimit,
} from "./config.ts";
export type {
  ChunkData,
  ClientApi,
  Event,
  EventKind,
  Headers,
  Priority,
  RequestId,
  WorkerId,
} from "./events/event.ts";
export type {
  CacheReport,
  ClientError,
  Effect,
  EffectKind,
  LifecycleReplyKind,
  LogLevel,
  Outcome,
  TokenUsage,
} from "./effect.ts";
export {
  initialState,
  type Request,
  type State,
  type Worker,
} from "./state/state.ts";
export { eventFromBinaryFrame, eventFromFrame } from "./events/from_frame.ts";
export { effectiveLoad, WILDCARD_MODEL } from "./state/workers.ts";
export { aliasTarget } from "./state/aliases.ts";
export * from "./queries.ts";
export type {
  LifecyclePart,
  LifecycleStatus,
  LifecycleTaskView,
} from "./vocabulary.ts";
export {
  lifecycleTaskView,
  type ModelStatus,
  modelStatuses,
} from "./state/lifecycle.ts";
export * from "./protocol/mod.ts";
export * from "./views/mod.ts";
export { VERSION } from "./version.ts";
