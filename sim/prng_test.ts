import assert from "node:assert/strict";
import { EventQueue } from "./event_queue.ts";
import { parseSeed, Prng } from "./prng.ts";
import { TraceHash } from "./trace.ts";

Deno.test("seeds: decimal and 40-hex git SHA parse; anything else is refused", () => {
  assert.equal(parseSeed("42"), 42n);
  assert.equal(
    parseSeed("1a83242" + "0".repeat(33)),
    BigInt("0x1a83242" + "0".repeat(33)),
  );
  assert.equal(parseSeed("-1"), null);
  assert.equal(parseSeed("abc"), null);
});

Deno.test("prng: same seed same stream, forks independent, ranges inclusive", () => {
  const a = Prng.fromSeed(7n);
  const b = Prng.fromSeed(7n);
  const xs = Array.from({ length: 100 }, () => a.u32());
  assert.deepEqual(xs, Array.from({ length: 100 }, () => b.u32()));
  const c = Prng.fromSeed(8n);
  assert.notDeepEqual(xs.slice(0, 5), Array.from({ length: 5 }, () => c.u32()));
  const p = Prng.fromSeed(1n);
  const f1 = p.fork();
  const f2 = p.fork();
  assert.notEqual(f1.u32(), f2.u32());
  const seen = new Set<number>();
  for (let i = 0; i < 2_000; i++) {
    const v = p.int(3, 6);
    assert.ok(v >= 3 && v <= 6);
    seen.add(v);
  }
  assert.equal(seen.size, 4);
  assert.equal(p.chance(0, 5), false);
  assert.equal(p.chance(5, 5), true);
});

Deno.test("event queue: ordered by (atMs, seq), ties in insertion order", () => {
  const q = new EventQueue<string>();
  q.push(5, "c");
  q.push(1, "a");
  q.push(5, "d");
  q.push(1, "b");
  q.push(3, "x");
  const out: string[] = [];
  for (let e = q.pop(); e !== null; e = q.pop()) out.push(e.item);
  assert.deepEqual(out, ["a", "b", "x", "c", "d"]);
});

Deno.test("trace hash is FNV-1a 64 (reference vectors)", () => {
  const empty = new TraceHash();
  assert.equal(empty.hex(), "cbf29ce484222325");
  const a = new TraceHash();
  a.bytes([0x61]);
  assert.equal(a.hex(), "af63dc4c8601ec8c");
  const foobar = new TraceHash();
  foobar.bytes([...new TextEncoder().encode("foobar")]);
  assert.equal(foobar.hex(), "85944171f73967e8");
});
