import assert from "node:assert/strict";
import {
  bucketAdd,
  bucketEntries,
  bucketFirst,
  bucketFirstExcept,
  bucketFirstWhere,
  bucketForget,
  bucketPark,
  bucketsEmpty,
  emptyBuckets,
} from "./load_buckets.ts";

Deno.test("the least-loaded worker goes first, the longest waiting at its level first among equals", () => {
  const b = emptyBuckets();
  bucketAdd(b, 2, "a");
  bucketAdd(b, 1, "b");
  bucketAdd(b, 1, "c");
  assert.equal(bucketFirst(b), "b");
  assert.deepEqual([...bucketEntries(b)], [[1, "b"], [1, "c"], [2, "a"]]);
});

Deno.test("a worker moving to another level goes to the back of it", () => {
  const b = emptyBuckets();
  for (const id of ["a", "b", "c"]) bucketAdd(b, 0, id);
  bucketAdd(b, 1, "a");
  bucketAdd(b, 0, "a");
  assert.deepEqual([...bucketEntries(b)], [[0, "b"], [0, "c"], [0, "a"]]);
  assert.deepEqual(b.levels, [0]);
});

Deno.test("adding a worker at the level it is at keeps its place", () => {
  const b = emptyBuckets();
  bucketAdd(b, 0, "a");
  bucketAdd(b, 0, "b");
  bucketAdd(b, 0, "a");
  assert.deepEqual([...bucketEntries(b)], [[0, "a"], [0, "b"]]);
});

Deno.test("a parked worker is skipped, keeps its node, and comes back at the back of its level", () => {
  const b = emptyBuckets();
  for (const id of ["a", "b"]) bucketAdd(b, 0, id);
  bucketPark(b, "a");
  assert.equal(bucketFirst(b), "b");
  assert.equal(b.nodes.size, 2);
  assert.equal(bucketsEmpty(b), false);
  bucketAdd(b, 0, "a");
  assert.deepEqual([...bucketEntries(b)], [[0, "b"], [0, "a"]]);
});

Deno.test("forgetting every worker empties the buckets, levels included", () => {
  const b = emptyBuckets();
  bucketAdd(b, 0, "a");
  bucketAdd(b, 3, "b");
  bucketPark(b, "b");
  assert.deepEqual(b.levels, [0]);
  bucketForget(b, "a");
  bucketForget(b, "b");
  assert.equal(bucketsEmpty(b), true);
  assert.deepEqual(b.levels, []);
  assert.equal(b.byLevel.size, 0);
  assert.equal(bucketFirst(b), null);
});

Deno.test("bucketFirstExcept and bucketFirstWhere look further, lowest level first", () => {
  const b = emptyBuckets();
  bucketAdd(b, 0, "a");
  bucketAdd(b, 1, "b");
  bucketAdd(b, 1, "c");
  assert.equal(bucketFirstExcept(b, "a"), "b");
  assert.equal(bucketFirstWhere(b, (id) => id === "c"), "c");
  assert.equal(bucketFirstWhere(b, () => false), null);
  assert.equal(bucketFirst(undefined), null);
});

Deno.test("removing a middle, head and tail worker keeps the others linked in order", () => {
  const b = emptyBuckets();
  for (const id of ["a", "b", "c", "d"]) bucketAdd(b, 0, id);
  bucketPark(b, "b");
  bucketForget(b, "a");
  bucketPark(b, "d");
  assert.deepEqual([...bucketEntries(b)], [[0, "c"]]);
  bucketAdd(b, 0, "d");
  bucketAdd(b, 0, "b");
  assert.deepEqual([...bucketEntries(b)], [[0, "c"], [0, "d"], [0, "b"]]);
});
