// A virtual client: arrives at its time with a model, streaming or not, and
// may abort after n chunks or t ms (or stall as a slow reader). It only acts;
// what it receives is checked by the invariants (invariants.ts).
import type { Effect } from "../core/mod.ts";
import type { ClientSpec } from "./scenario.ts";
import type { World } from "./world.ts";

export class VirtualClient {
  readonly spec: ClientSpec;
  readonly requestId: string;
  readonly #world: World;
  ended = false;
  #chunks = 0;
  #abortSent = false;

  constructor(spec: ClientSpec, requestId: string, world: World) {
    this.spec = spec;
    this.requestId = requestId;
    this.#world = world;
  }

  arrive(now: number): void {
    this.#world.schedule(now, {
      kind: "core",
      event: {
        kind: "requestReceived",
        atMs: now,
        requestId: this.requestId,
        api: this.spec.model.length % 2 === 0 ? "openai" : "anthropic",
        endpointPath: this.spec.path ?? "/v1/chat/completions",
        model: this.spec.model,
        isStreaming: this.spec.streaming,
        // Issue 25: a body that is not text travels as base64.
        ...(this.spec.binary === true
          ? { body: "/wD+", bodyBase64: true, method: "POST" }
          : { body: `{"model":"${this.spec.model}"}` }),
        headers: { authorization: "Bearer k", "x-secret": "kept at relay" },
        ...(this.spec.tenant === undefined ? {} : { tenant: this.spec.tenant }),
        ...(this.spec.priority === undefined
          ? {}
          : { priority: this.spec.priority }),
        ...(this.spec.cacheKey === undefined
          ? {}
          : { cacheKey: this.spec.cacheKey }),
      },
    });
    if (this.spec.abortAfterMs !== null) {
      this.#abort(now + this.spec.abortAfterMs);
    }
  }

  #abort(at: number): void {
    if (this.#abortSent) return;
    this.#abortSent = true;
    this.#world.schedule(at, {
      kind: "core",
      event: this.spec.stall
        ? { kind: "clientStalled", atMs: at, requestId: this.requestId }
        : { kind: "clientDisconnected", atMs: at, requestId: this.requestId },
    });
  }

  /**
   * An answer in pieces (issue 33.3): a reader takes it at once (the shell's
   * drain, then its close); a slow reader (`stall`) takes nothing and waits
   * for the server to cut it.
   */
  #take(now: number, f: Extract<Effect, { kind: "respond" }>): void {
    if (f.bodyPieces === undefined || this.spec.stall) return;
    const written = f.bodyPieces.reduce((n, p) => n + p.length, 0);
    this.#report(now + 1, { kind: "responseProgress", written });
    this.#report(now + 2, { kind: "responseSent" });
  }

  #report(
    at: number,
    what: { kind: "responseSent" } | {
      kind: "responseProgress";
      written: number;
    },
  ): void {
    this.#world.schedule(at, {
      kind: "core",
      event: { ...what, atMs: at, requestId: this.requestId },
    });
  }

  /** Whether an abort scheduled for now still matters (a finished client has nothing to abort). */
  wantsAbort(): boolean {
    return !this.ended;
  }

  onEffect(now: number, f: Effect): void {
    switch (f.kind) {
      case "writeChunk":
        this.#chunks++;
        if (
          this.spec.abortAfterChunks !== null &&
          this.#chunks >= this.spec.abortAfterChunks
        ) this.#abort(now + 1);
        return;
      case "respond":
        this.ended = true;
        return this.#take(now, f);
      case "respondError":
      case "endStream":
        this.ended = true;
        return;
      case "cutResponse":
        // Issue 33.3: the server closed the connection; its bytes are gone.
        return this.#report(now + 1, { kind: "responseSent" });
      default:
        return;
    }
  }
}
