// The simulator's faults (issues 16, 23, 34): crashes, freezes, log stalls,
// blips, resets, failovers and leaves, each where it has something to break.
import { loseTail, wipe } from "./log.ts";
import {
  type ClusterFault,
  FAULTS_UNTIL_MS,
  feed,
  type Inst,
  type World,
} from "./shape.ts";
import { closeConn, dropLocal, gone, instanceLeft } from "./fleet.ts";
import { linksDie } from "./links.ts";

// ---- faults -------------------------------------------------------------------

export function serving(w: World): Inst[] {
  return w.insts.filter((x) =>
    x.proc === "running" && x.host.inst.phase === "serving"
  );
}

export function fault(w: World, f: ClusterFault): void {
  const live = serving(w);
  w.trace?.(`${w.now} fault ${f}`);
  w.lastFaultMs = w.now;
  for (const l of w.leaves) if (!l.done) l.disturbed ||= f !== "duplicate";
  switch (f) {
    case "crash":
      if (live.length < 2) return;
      return crash(w, w.prng.pick(live));
    case "crashAtEnd":
      w.crashAtEnd = true;
      return;
    case "stall": {
      if (live.length < 2) return;
      const v = w.prng.pick(live);
      v.proc = "frozen";
      v.frozenAtMs = w.now;
      v.thawAtMs = w.now + w.prng.int(1_500, 8_000);
      w.queue.push(v.thawAtMs, { k: "thaw", i: v.idx });
      return;
    }
    case "logStall":
      // The log stalls (a slow fork): appends wait, nothing is lost.
      w.log.stalledUntil = w.now + w.prng.int(2_500, 4_000);
      return;
    case "blip": {
      // One instance's connection to the engine breaks for a moment; the log
      // and the other instances carry on.
      if (live.length < 2) return;
      // With a stream in flight: what a hold must get right.
      const busy = live.filter(streaming(w));
      if (busy.length === 0 && putOff(w, f)) return;
      const v = w.prng.pick(busy.length > 0 ? busy : live);
      v.cutUntil = w.now + w.prng.int(300, 2_000);
      feed(w, v, {
        kind: "logLost",
        reason: "engine connection closed",
        reset: false,
      });
      return;
    }
    case "reset":
      // The engine restarts empty: every connection breaks, the log is new.
      if (!wholeWaiting(w) && putOff(w, f)) return;
      wipe(w.log);
      w.history++;
      return everyoneLoses(w, w.now + w.prng.int(500, 2_000));
    case "failover":
      // The master dies; a replica that missed the last entries takes over.
      if (!wholeWaiting(w) && putOff(w, f)) return;
      loseTail(w.log, w.prng.int(1, 6));
      w.history++;
      return everyoneLoses(w, w.now + w.prng.int(300, 1_500));
    case "leave":
      return leave(w, live);
    case "duplicate":
      return; // acts on appends (send)
  }
}

/** Whether an instance holds a client whose stream has begun. */
export function streaming(w: World): (x: Inst) => boolean {
  return (x) =>
    [...x.clients].some((id) => w.clients.get(id)?.started === true);
}

/**
 * Whether a client has its whole stream (its instance learnt it completed)
 * and waits for the log's end: what a lost log must end cleanly (issue 33).
 */
export function wholeWaiting(w: World): boolean {
  for (const [id, per] of w.completedAt) {
    const c = w.clients.get(id);
    if (c !== undefined && c.connected && per.has(c.received)) return true;
  }
  return false;
}

/**
 * A fault that must meet a stream in flight waits for one (a few ms at a
 * time, until well after the fault window); true when it was put off.
 */
export function putOff(w: World, f: ClusterFault): boolean {
  if (w.now >= FAULTS_UNTIL_MS + 10_000) return false;
  w.queue.push(w.now + 7, { k: "fault", fault: f });
  return true;
}

export function crash(w: World, v: Inst): void {
  if (v.proc !== "running" && v.proc !== "frozen") return;
  w.trace?.(`${w.now} ${v.host.inst.id} crashes`);
  v.proc = "crashed";
  // Its sockets die with it: workers reconnect elsewhere, clients are gone,
  // its peer links close (what was still on them may be lost).
  for (const id of [...v.conns]) closeConn(w, w.conns.get(id)!, true);
  for (const r of v.clients) gone(w, w.clients.get(r)!);
  v.clients.clear();
  for (const l of w.links) if (l.from === v.idx) l.severed = true;
  linksDie(w, v);
}

export function everyoneLoses(w: World, backAtMs: number): void {
  w.log.stalledUntil = backAtMs;
  w.log.waiting = [];
  w.linksLost = true;
  for (const x of w.insts) {
    if (x.proc === "frozen") x.broken = true;
    // The engine tells: the log is not the one applied (new epoch, lost tail).
    feed(w, x, { kind: "logLost", reason: "log reset", reset: true });
  }
}

/** SIGTERM of one instance: it drains its own sockets, then leaves. */
export function leave(w: World, live: Inst[]): void {
  if (live.length < 2) return;
  const busy = live.filter((x) => x.clients.size > 0);
  if (busy.length === 0 && w.now < FAULTS_UNTIL_MS + 10_000) {
    // Leave with requests in flight: that is what a leave must get right.
    w.queue.push(w.now + 97, { k: "fault", fault: "leave" });
    return;
  }
  const v = w.prng.pick(busy.length > 0 ? busy : live);
  w.leaves.push({
    inst: v.idx,
    startMs: w.now,
    clients: new Set(v.clients),
    disturbed: false,
    done: false,
  });
  if (w.mutant === "leaveAtOnce") {
    feed(w, v, { kind: "closeRequested" });
    dropLocal(w, v, 503);
    return instanceLeft(w, v);
  }
  if (w.mutant === "leaveDropsDirect") {
    v.host.senders.clear();
    v.host.receivers.clear();
  }
  feed(w, v, { kind: "leaveRequested" });
}
