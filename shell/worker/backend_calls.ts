// The worker's calls to its backend that the core asked for: inference requests
// forwarded (each abortable by request id) and model listings, their outcomes
// turned back into worker events.
import { assertNever } from "../../core/assert_never.ts";
import type { RequestMessage } from "../../core/protocol/mod.ts";
import type { WorkerInput } from "../../core/worker/mod.ts";
import {
  type Backend,
  listBackendModels,
  startBackendCall,
} from "./backend_client.ts";

export type BackendCallsDeps = {
  backend: Backend;
  dispatch: (event: WorkerInput) => void;
  /**
   * Keeps a model listing's promise until it settles, so nothing outlives the
   * worker (a forwarded call needs none: abortAll settles every one at once).
   */
  track: (p: Promise<unknown>) => void;
  /** Whether the server negotiated body-chunks-v1 (read per request: a reconnect may reach another server). */
  bodyChunks: () => boolean;
  /** Whether the server negotiated chunk-bytes-v1 (read per request, like bodyChunks). */
  chunkBytes: () => boolean;
  /** Whether the server negotiated body-bytes-v1 (issue 25; read per request, like bodyChunks). */
  bodyBytes: () => boolean;
  /** Whether the proxy socket can take more answer bytes now. */
  hasRoom: () => boolean;
  /** Aborted when the worker stops. */
  stopped: AbortSignal;
};

export type BackendCalls = {
  forward(request: RequestMessage): void;
  abort(requestId: string): void;
  abortAll(): void;
  listModels(reply: boolean): void;
};

export function makeBackendCalls(deps: BackendCallsDeps): BackendCalls {
  /** Each call in flight's cancel, by request id. */
  const calls = new Map<string, () => void>();
  return {
    forward(request) {
      const id = request.request_id;
      /** Null until started: a call that fails at once is never listed. */
      let cancel: (() => void) | null = null;
      let over = false;
      cancel = startBackendCall("own", deps.backend, request, {
        chunk: (chunk) =>
          deps.dispatch({ kind: "chunkRead", requestId: id, chunk }),
        head: (status, headers) =>
          deps.dispatch({ kind: "headRead", requestId: id, status, headers }),
        bodyChunks: deps.bodyChunks(),
        chunkBytes: deps.chunkBytes(),
        bodyBytes: deps.bodyBytes(),
        hasRoom: deps.hasRoom,
      }, (outcome) => {
        over = true;
        if (cancel !== null && calls.get(id) === cancel) calls.delete(id);
        switch (outcome.kind) {
          case "completed":
            return deps.dispatch({
              kind: "backendFinished",
              requestId: id,
              completion: outcome.completion,
            });
          case "failed":
            return deps.dispatch({
              kind: outcome.code === "backend_unavailable"
                ? "backendUnavailable"
                : "backendStreamBroken",
              requestId: id,
              message: outcome.message,
            });
          case "cancelled":
            return;
          default:
            return assertNever(outcome);
        }
      });
      if (!over) calls.set(id, cancel);
    },
    abort(requestId) {
      const cancel = calls.get(requestId);
      calls.delete(requestId);
      cancel?.();
    },
    abortAll() {
      const all = [...calls.values()];
      calls.clear();
      for (const cancel of all) cancel();
    },
    listModels(reply) {
      deps.track(
        listBackendModels(deps.backend, deps.stopped).then(
          (listed) =>
            deps.dispatch({ kind: "modelsListed", models: listed, reply }),
          (e: unknown) =>
            deps.dispatch({
              kind: "modelsListFailed",
              message: (e as Error).message,
              reply,
            }),
        ),
      );
    },
  };
}
