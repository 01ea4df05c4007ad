// The worker core's surface (issue 27): everything the worker's shell
// (shell/worker/) and the simulator's virtual worker (sim/) use of it, named
// one by one. They import this file, never a module of core/worker/ itself
// (tools/import_layers_test.ts checks), so what lies behind it can move.
// Tests outside may also use the `_testing.ts` builders.

/** The decision: one event in, the actions to carry out. */
export { connectActions, startActions, step } from "./decide.ts";
export { CAPABILITIES_INTERVAL_MS } from "./periodic.ts";
/** Issue 30: the residency timer and the frame a backend read makes. */
export {
  RESIDENCY_GAP_MS,
  RESIDENCY_INTERVAL_MS,
  residencyFrame,
} from "./residency.ts";
/** What each poll of a model load means (the shell fetches and waits). */
export {
  LOAD_POLL_MS,
  type LoadPoll,
  routerLoadPoll,
  spec004LoadPoll,
  UNLOADED_GIVE_UP_MS,
} from "./load_poll.ts";
export {
  type BackendResidency,
  type Completion,
  initialWorkerState,
  type TimerName,
  WORKER_EXTENSIONS,
  WORKER_FRAME_BYTES_MAX,
  type WorkerAction,
  type WorkerEvent,
  type WorkerInput,
  type WorkerState,
} from "./worker_state.ts";
export { FRAME_CHARS_MAX } from "./link_limits.ts";
/** The frames of an answer and of a request not answered (compared in tests). */
export { completionFrames } from "./answers.ts";
export { notAnsweredMessage } from "./worker_actions.ts";
