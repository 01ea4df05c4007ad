// Workers that can take a request for one model, grouped by load level, so the
// least-loaded worker is found in O(levels) instead of a scan of every worker
// (issue 3: dispatch stays sub-linear). Within a level, a Set keeps the order in
// which workers reached that level: the one waiting there longest goes first,
// which is the round-robin tie-break (C8).
import type { WorkerId } from "../vocabulary.ts";

export type LoadBuckets = {
  /** Non-empty load levels, ascending. */
  levels: number[];
  byLevel: Map<number, Set<WorkerId>>;
};

export function emptyBuckets(): LoadBuckets {
  return { levels: [], byLevel: new Map() };
}

export function bucketAdd(b: LoadBuckets, level: number, id: WorkerId): void {
  let set = b.byLevel.get(level);
  if (set === undefined) {
    set = new Set();
    b.byLevel.set(level, set);
    let i = b.levels.length;
    while (i > 0 && b.levels[i - 1]! > level) i--;
    b.levels.splice(i, 0, level);
  }
  set.add(id);
}

export function bucketRemove(
  b: LoadBuckets,
  level: number,
  id: WorkerId,
): void {
  const set = b.byLevel.get(level);
  if (set === undefined || !set.delete(id) || set.size > 0) return;
  b.byLevel.delete(level);
  b.levels.splice(b.levels.indexOf(level), 1);
}

/** The least-loaded worker that has waited longest at its level, or null. */
export function bucketFirst(b: LoadBuckets | undefined): WorkerId | null {
  if (b === undefined) return null;
  const level = b.levels[0];
  if (level === undefined) return null;
  const first = b.byLevel.get(level)!.values().next();
  return first.done === true ? null : first.value;
}

/** Like `bucketFirst`, skipping `skip` (a requeued request avoids the worker it failed on). */
export function bucketFirstExcept(
  b: LoadBuckets | undefined,
  skip: WorkerId,
): WorkerId | null {
  if (b === undefined) return null;
  for (const level of b.levels) {
    for (const id of b.byLevel.get(level)!) {
      if (id !== skip) return id;
    }
  }
  return null;
}

/** The least-loaded worker that has waited longest at its level and passes `fits`, or null. */
export function bucketFirstWhere(
  b: LoadBuckets | undefined,
  fits: (id: WorkerId) => boolean,
): WorkerId | null {
  if (b === undefined) return null;
  for (const level of b.levels) {
    for (const id of b.byLevel.get(level)!) {
      if (fits(id)) return id;
    }
  }
  return null;
}
