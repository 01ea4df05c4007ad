// Workers that can take a request for one model, grouped by load level, so the
// least-loaded worker is found in O(levels) instead of a scan of every worker
// (issue 3: dispatch stays sub-linear). Within a level, workers are kept in the
// order in which they reached that level: the one waiting there longest goes
// first, which is the round-robin tie-break (C8).
//
// Each level is a doubly linked list threaded through one node per worker
// (linked by id), and the node stays in `nodes` while the worker is out of every
// level (full, draining, circuit open): a move between levels, or out and back
// in, relinks the node and deletes or re-adds no key of `nodes`. V8's Set and
// Map take ~30–50 µs to delete and re-add the same key in a table of 10,000 (a
// rotating key costs under 1 µs), which is what a Set per level did on every
// dispatch and release when one worker of a large fleet moved (bench/README.md,
// "Load buckets"; C210). `byLevel` does add and drop levels, but it holds a few
// keys at most. Only `bucketForget` (the worker gone, or no longer under the
// key) deletes a node.
import type { WorkerId } from "../vocabulary.ts";

/**
 * Links are worker ids, not object references: the state stays a tree of plain
 * objects and Maps, which replica snapshots and digests (core/cluster) encode.
 */
export type BucketNode = {
  /** The level it is linked at, or null while parked (in no level). */
  level: number | null;
  prev: WorkerId | null;
  next: WorkerId | null;
};

/** One load level: its workers, longest-waiting first. Never empty while in `byLevel`. */
export type BucketLevel = { head: WorkerId; tail: WorkerId };

export type LoadBuckets = {
  /** Non-empty load levels, ascending. */
  levels: number[];
  byLevel: Map<number, BucketLevel>;
  /** Every worker linked at a level, and those parked out of all of them. */
  nodes: Map<WorkerId, BucketNode>;
};

export function emptyBuckets(): LoadBuckets {
  return { levels: [], byLevel: new Map(), nodes: new Map() };
}

/** Whether it holds no worker, filed or parked (its owner then drops it). */
export function bucketsEmpty(b: LoadBuckets): boolean {
  return b.nodes.size === 0;
}

function link(b: LoadBuckets, id: WorkerId, node: BucketNode, level: number) {
  node.level = level;
  node.next = null;
  const at = b.byLevel.get(level);
  if (at !== undefined) {
    node.prev = at.tail;
    b.nodes.get(at.tail)!.next = id;
    at.tail = id;
    return;
  }
  node.prev = null;
  b.byLevel.set(level, { head: id, tail: id });
  // Shifted in place: splice would make an array of what it removed, on
  // every move of a worker to a level nobody holds (issue 31).
  const levels = b.levels;
  let i = levels.length;
  for (; i > 0 && levels[i - 1]! > level; i--) levels[i] = levels[i - 1]!;
  levels[i] = level;
}

function unlink(b: LoadBuckets, node: BucketNode): void {
  const level = node.level;
  if (level === null) return;
  const { prev, next } = node;
  const at = b.byLevel.get(level)!;
  if (prev === null) at.head = next!;
  else b.nodes.get(prev)!.next = next;
  if (next === null) at.tail = prev!;
  else b.nodes.get(next)!.prev = prev;
  if (prev === null && next === null) {
    b.byLevel.delete(level);
    const levels = b.levels;
    for (let i = levels.indexOf(level); i < levels.length - 1; i++) {
      levels[i] = levels[i + 1]!;
    }
    levels.pop();
  }
  node.level = null;
  node.prev = null;
  node.next = null;
}

/**
 * Files `id` at `level`: last there (it has waited least) when it comes from
 * another level, from parking or from nowhere; where it is when already there.
 */
export function bucketAdd(b: LoadBuckets, level: number, id: WorkerId): void {
  const node = b.nodes.get(id);
  if (node === undefined) {
    const fresh: BucketNode = { level: null, prev: null, next: null };
    b.nodes.set(id, fresh);
    link(b, id, fresh, level);
    return;
  }
  if (node.level === level) return;
  unlink(b, node);
  link(b, id, node, level);
}

/**
 * Takes `id` out of its level but keeps its node, for a worker that may come
 * back (full, draining, circuit open): `bucketAdd` then relinks it without
 * touching `nodes`.
 */
export function bucketPark(b: LoadBuckets, id: WorkerId): void {
  const node = b.nodes.get(id);
  if (node !== undefined) unlink(b, node);
}

/** Takes `id` out for good (gone, or no longer under this key). */
export function bucketForget(b: LoadBuckets, id: WorkerId): void {
  const node = b.nodes.get(id);
  if (node === undefined) return;
  unlink(b, node);
  b.nodes.delete(id);
}

/** The workers at each level, levels ascending, each longest-waiting first (tests, the simulator). */
export function* bucketEntries(
  b: LoadBuckets,
): Generator<[level: number, id: WorkerId]> {
  for (const level of b.levels) {
    let id: WorkerId | null = b.byLevel.get(level)!.head;
    for (; id !== null; id = b.nodes.get(id)!.next) yield [level, id];
  }
}

/** The least-loaded worker that has waited longest at its level, or null. */
export function bucketFirst(b: LoadBuckets | undefined): WorkerId | null {
  if (b === undefined) return null;
  const level = b.levels[0];
  if (level === undefined) return null;
  return b.byLevel.get(level)!.head;
}

/** Like `bucketFirst`, skipping `skip` (a requeued request avoids the worker it failed on). */
export function bucketFirstExcept(
  b: LoadBuckets | undefined,
  skip: WorkerId,
): WorkerId | null {
  return bucketFirstWhere(b, (id) => id !== skip);
}

/** The least-loaded worker that has waited longest at its level and passes `fits`, or null. */
export function bucketFirstWhere(
  b: LoadBuckets | undefined,
  fits: (id: WorkerId) => boolean,
): WorkerId | null {
  if (b === undefined) return null;
  for (const level of b.levels) {
    let id: WorkerId | null = b.byLevel.get(level)!.head;
    for (; id !== null; id = b.nodes.get(id)!.next) if (fits(id)) return id;
  }
  return null;
}
