// Whether the cluster's Redis is reachable, as the engine sees it (issue 23).
// A dropped connection is not a lost log: ioredis reconnects at once (through
// Sentinel to whichever server is master now), and commands that failed on the
// dropped connection wait for the reconnect and are sent again. Only silence
// longer than CLUSTER_LOG_TIMEOUT_MS (no connection, or no answer on one)
// declares the log lost ("silent"), which rejects everything still waiting. A
// reconnect that finds another log than the one this instance applied (new
// epoch, or the entry it applied last is gone: a failover to a replica that
// lagged) declares it lost too ("reset"), and usable again at once.
import type { EngineLoss, EngineStatus } from "./engine.ts";

export class LogLostError extends Error {
  override name = "LogLostError";
}

export type LinkState = "up" | "blinking" | "down";

export type Link = {
  readonly state: LinkState;
  /** Bumped when the log is declared lost: work started before must not go on after. */
  readonly generation: number;
  /** Resolves once the link is up; rejects when the log is (or gets) declared lost. */
  usable(): Promise<void>;
  /** A connection dropped: wait for it, up to the silence limit. */
  blink(): void;
  /** Every connection is back and checked. */
  restored(): void;
  /** Declares the log lost: silent too long, or replaced ("reset"). */
  lose(kind: EngineLoss["kind"], reason: string): void;
  onLost(listener: (e: LogLostError, kind: EngineLoss["kind"]) => void): void;
  stop(): void;
};

export function makeLink(
  silenceMs: number,
  emit: (status: EngineStatus, loss: EngineLoss | null) => void,
): Link {
  let state: LinkState = "up";
  let since = 0;
  let generation = 0;
  let waiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  const lostListeners: ((
    e: LogLostError,
    kind: EngineLoss["kind"],
  ) => void)[] = [];
  const watchdog = setInterval(() => {
    if (state === "blinking" && Date.now() - since >= silenceMs) {
      link.lose("silent", `no connection to Redis for ${silenceMs} ms`);
    }
  }, Math.max(10, Math.min(250, silenceMs / 4)));
  const link: Link = {
    get state() {
      return state;
    },
    get generation() {
      return generation;
    },
    usable() {
      if (state === "up") return Promise.resolve();
      if (state === "down") {
        return Promise.reject(new LogLostError("the cluster log is down"));
      }
      return new Promise((resolve, reject) =>
        waiters.push({ resolve, reject })
      );
    },
    blink() {
      if (state !== "up") return;
      state = "blinking";
      since = Date.now();
    },
    restored() {
      const was = state;
      state = "up";
      const w = waiters;
      waiters = [];
      for (const x of w) x.resolve();
      if (was === "down") emit("up", null);
    },
    lose(kind, reason) {
      generation++;
      state = kind === "silent" ? "down" : "up";
      const e = new LogLostError(`the cluster log was lost: ${reason}`);
      const w = waiters;
      waiters = [];
      for (const x of w) x.reject(e);
      for (const l of lostListeners) l(e, kind);
      emit("down", { kind, detail: reason });
      if (kind === "reset") emit("up", null);
    },
    onLost(listener) {
      lostListeners.push(listener);
    },
    stop() {
      clearInterval(watchdog);
      const w = waiters;
      waiters = [];
      for (const x of w) x.reject(new LogLostError("the engine is closed"));
    },
  };
  return link;
}

/** What a failed command means for the log. */
export type Failure = "connection" | "busy" | "timeout" | "reply";

export function classify(e: unknown): Failure {
  const message = e instanceof Error ? e.message : String(e);
  if (/^(LOADING|READONLY|MASTERDOWN|TRYAGAIN|NOREPLICAS)\b/.test(message)) {
    return "busy";
  }
  if (/Command timed out/i.test(message)) return "timeout";
  if ((e as Error)?.name === "ReplyError") return "reply";
  return "connection";
}

/**
 * Runs `op` on a usable link; after a dropped connection, again once it is
 * back (at once: ioredis reconnects without delay); after a "busy" answer (a
 * server loading or just demoted), again shortly. Gives up when the log is
 * declared lost, or on a real error reply.
 */
export async function retrying<T>(
  link: Link,
  silenceMs: number,
  /** Whether the connection `op` uses is up (it may be back already when `op` fails). */
  connected: () => boolean,
  op: () => Promise<T>,
): Promise<T> {
  const generation = link.generation;
  let busySince: number | null = null;
  for (;;) {
    await link.usable();
    if (link.generation !== generation) {
      throw new LogLostError("the cluster log was lost meanwhile");
    }
    try {
      return await op();
    } catch (e) {
      if (link.generation !== generation) throw e;
      const failure = classify(e);
      if (failure === "reply") throw e;
      if (failure === "timeout") {
        link.lose("silent", `Redis did not answer within ${silenceMs} ms`);
        throw e;
      }
      if (failure === "connection") {
        if (connected()) await new Promise((r) => setTimeout(r, 10));
        else link.blink();
      } else {
        busySince ??= Date.now();
        if (Date.now() - busySince > silenceMs) {
          link.lose("silent", `Redis kept answering ${(e as Error).message}`);
          throw e;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}
