// Whether the cluster's Redis is reachable, as the engine sees it (issue 23).
// A dropped connection is not a lost log: ioredis reconnects at once (through
// Sentinel to whichever server is master now), and commands that failed on the
// dropped connection wait for the reconnect and are sent again. Only silence
// longer than CLUSTER_LOG_TIMEOUT_MS (no connection, or no answer on one)
// declares the log lost ("silent"), which rejects everything still waiting. A
// reconnect that finds another log than the one this instance applied (new
// epoch, or the entry it applied last is gone: a failover to a replica that
// lagged) declares it lost too ("reset"), and usable again at once.
//
// Issue 33: silence is measured by this process's clock, which also runs on
// when this process does not (SIGSTOP, a VM paused, a starved CPU). Woken, its
// overdue command timeouts fire before any answer already waiting on the
// socket is read, so a freeze looks like a Redis that did not answer. The
// watchdog's beat sees the freeze as a gap in the event loop; a loss within
// one silence window of a gap longer than half of it blames this process, not
// Redis. The log is declared lost all the same: while frozen, the instance
// missed its lease, and what it held may have been taken over.
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
  /** Issue 33: `redisSilent`, or this process's own freeze when its event loop stood still lately. */
  blame(redisSilent: string): string;
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
  const beatMs = Math.max(10, Math.min(250, silenceMs / 4));
  const clock = freezeClock(silenceMs, beatMs);
  const watchdog = setInterval(() => {
    clock.beat();
    if (state === "blinking" && Date.now() - since >= silenceMs) {
      link.lose(
        "silent",
        clock.blame(`no connection to Redis for ${silenceMs} ms`),
      );
    }
  }, beatMs);
  const link: Link = {
    get state() {
      return state;
    },
    get generation() {
      return generation;
    },
    blame: (redisSilent) => clock.blame(redisSilent),
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

/**
 * The longest the event loop stood still within the last silence window, as
 * the watchdog's beat sees it: a beat due every `beatMs` that comes late came
 * late because nothing ran. Asked before the overdue beat has run, the time
 * since the last beat is the gap still going on.
 */
export function freezeClock(silenceMs: number, beatMs: number) {
  let lastBeat = Date.now();
  let worst = { ms: 0, at: 0 };
  const frozenMs = (now: number) => {
    const current = now - lastBeat - beatMs;
    const recent = now - worst.at <= silenceMs ? worst.ms : 0;
    return Math.max(current, recent, 0);
  };
  return {
    beat() {
      const now = Date.now();
      const gap = now - lastBeat - beatMs;
      if (gap > worst.ms || now - worst.at > silenceMs) {
        worst = { ms: gap, at: now };
      }
      lastBeat = now;
    },
    blame(redisSilent: string): string {
      const ms = frozenMs(Date.now());
      if (ms * 2 < silenceMs) return redisSilent;
      return `this process stood still for ${ms} ms (its event loop did not run: stopped, paused or starved of CPU), longer than half of the ${silenceMs} ms Redis may be silent; not a Redis fault`;
    },
  };
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
        link.lose(
          "silent",
          link.blame(`Redis did not answer within ${silenceMs} ms`),
        );
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
