// The linked load buckets (core/state/load_buckets.ts) against the plain
// structure they replaced: a Set per level in insertion order, scanned. Any
// sequence of files, moves, parks and forgets gives the same order and the same
// picks (C210; property test here because core/ may not import fast-check).
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  bucketAdd,
  bucketEntries,
  bucketFirst,
  bucketFirstExcept,
  bucketForget,
  bucketPark,
  bucketsEmpty,
  emptyBuckets,
} from "../../core/state/load_buckets.ts";

/** The reference: worker -> level, kept in the order each reached its level. */
type Plain = Map<string, number>;

function plainAdd(p: Plain, level: number, id: string): void {
  if (p.get(id) === level) return;
  p.delete(id);
  p.set(id, level);
}

function plainOrder(p: Plain): [number, string][] {
  const out: [number, string][] = [];
  const levels = [...new Set(p.values())].sort((a, b) => a - b);
  for (const level of levels) {
    for (const [id, l] of p) if (l === level) out.push([level, id]);
  }
  return out;
}

const ID = fc.constantFrom("a", "b", "c", "d", "e");
const op = fc.oneof(
  fc.record({
    k: fc.constant("add" as const),
    id: ID,
    level: fc.integer({ min: 0, max: 3 }),
  }),
  fc.record({ k: fc.constant("park" as const), id: ID }),
  fc.record({ k: fc.constant("forget" as const), id: ID }),
);

Deno.test("property: the linked buckets order and pick workers as a scan of a Set per level does", () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
      const b = emptyBuckets();
      const plain: Plain = new Map();
      const known = new Set<string>();
      for (const o of ops) {
        if (o.k === "add") {
          bucketAdd(b, o.level, o.id);
          plainAdd(plain, o.level, o.id);
          known.add(o.id);
        } else if (o.k === "park") {
          bucketPark(b, o.id);
          plain.delete(o.id);
        } else {
          bucketForget(b, o.id);
          plain.delete(o.id);
          known.delete(o.id);
        }
        const order = plainOrder(plain);
        assert.deepEqual([...bucketEntries(b)], order);
        assert.deepEqual(b.levels, [...new Set(order.map(([l]) => l))]);
        assert.equal(bucketFirst(b), order[0]?.[1] ?? null);
        assert.equal(
          bucketFirstExcept(b, "a"),
          order.find(([, id]) => id !== "a")?.[1] ?? null,
        );
        // Nodes are kept for parked workers, and only for workers not forgotten.
        assert.deepEqual(new Set(b.nodes.keys()), known);
        assert.equal(bucketsEmpty(b), known.size === 0);
      }
    }),
    { numRuns: 500 },
  );
});
