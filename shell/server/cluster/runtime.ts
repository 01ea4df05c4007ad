// The cluster runtime (issues 16, 23): the same `Runtime` as ../runtime.ts, but
// `submit` appends to the shared log instead of reducing, and every log entry
// (from any instance) is applied to this instance's replica, whose effects then
// run here when they concern what this instance holds (core/cluster/ownership.ts).
// The instance's life cycle (join, replay, serve, log lost, rejoin, leave) is
// decided in core/cluster/instance.ts and everything around it (outbox,
// ownership, the direct data path) in core/cluster/host.ts; this shell is the
// host's ports over Redis, sockets and timers (instance_io.ts).
//
// Events of one event-loop turn go out in one entry (unbatched, the JavaScript
// client tops out near 19k appends/s; scale-out.md §1).
import {
  type ClusterState,
  DEFAULT_LIVENESS,
  initialClusterState,
} from "../../../core/cluster/mod.ts";
import {
  compareIds,
  DEFAULT_INSTANCE_RULES,
  initialInstance,
  type Note,
} from "../../../core/cluster/instance.ts";
import type { Upgrade } from "../../ws/upgrade.ts";
import type { Runtime } from "../runtime.ts";
import type { ClusterEngine } from "./engine.ts";
import {
  advertise,
  appendNote,
  closeInstance,
  type ClusterDeps,
  firstJoin,
  submitObserved,
} from "./instance_io.ts";

export { type ClusterDeps, ClusterJoinError } from "./instance_io.ts";
export { compareIds, type Note };

export type ClusterRuntime = Runtime & {
  readonly engine: ClusterEngine;
  readonly instanceId: string;
  readonly cluster: ClusterState;
  readonly up: boolean;
  /** Appends a shell-level fact (API keys); every instance's `onNote` sees it in log order. */
  appendNote(note: Note): void;
  onNote(listener: (note: Note, mine: boolean) => void): void;
  /** Called after each rejoin; `fresh` when the log was new (Redis came back empty). */
  onRejoined(listener: (fresh: boolean) => void): void;
  /** Where peers send this instance answer pieces (CLUSTER_ADVERTISE_URL, issue 23). */
  advertise(url: string): void;
  /** The cluster secret in use (CLUSTER_SECRET or the generated one; "" before the first join). */
  peerSecret(): string;
  /** Takes an HTTP upgrade that is a peer link (issue 23); false for any other. */
  peerUpgrade: (upgrade: Upgrade) => boolean;
  close(): Promise<void>;
};

export async function startClusterRuntime(
  d: ClusterDeps,
): Promise<ClusterRuntime> {
  const cluster = initialClusterState(
    d.coreConfig,
    d.liveness ?? DEFAULT_LIVENESS,
    d.state,
  );
  const inst = initialInstance(
    d.coreConfig,
    cluster,
    `i-${crypto.randomUUID().slice(0, 8)}`,
    {
      ...DEFAULT_INSTANCE_RULES,
      snapshotEveryMs: d.snapshotEveryMs ??
        DEFAULT_INSTANCE_RULES.snapshotEveryMs,
      lostAfterMs: d.logLostMs ?? DEFAULT_INSTANCE_RULES.lostAfterMs,
    },
  );
  const io = await firstJoin(d, inst);
  return {
    state: d.state,
    submit: (event) => submitObserved(io, event),
    engine: d.engine,
    get instanceId() {
      return inst.id;
    },
    cluster,
    get up() {
      return inst.phase === "serving" || inst.phase === "leaving";
    },
    appendNote: (note) => appendNote(io, note),
    onNote(listener) {
      io.noteListeners.push(listener);
    },
    onRejoined(listener) {
      io.rejoinListeners.push(listener);
    },
    advertise: (url) => advertise(io, url),
    peerSecret: () => io.peerSecret,
    peerUpgrade: (upgrade) => io.links.onUpgrade(upgrade),
    close: () => closeInstance(io),
  };
}
