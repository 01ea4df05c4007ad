// Replica snapshots and digests (issue 16): a joining instance loads a snapshot
// taken at a log position and tails the log from there; replicas compare digests
// to prove they agree. The state is plain objects, arrays, Maps and Sets, so a
// tagged JSON form covers it; Map and Set order is kept, because iteration order
// is part of the state (round-robin, LRU, FIFO).
import type { ClusterState } from "./replica.ts";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function encodeValue(v: unknown): Json {
  if (v === null || v === undefined) return null;
  if (typeof v !== "object") return v as Json;
  if (v instanceof Map) {
    return { $m: [...v].map(([k, x]) => [encodeValue(k), encodeValue(x)]) };
  }
  if (v instanceof Set) return { $s: [...v].map(encodeValue) };
  if (Array.isArray(v)) return v.map(encodeValue);
  const out: { [k: string]: Json } = {};
  for (const k in v) {
    const x = (v as Record<string, unknown>)[k];
    if (x !== undefined) out[k] = encodeValue(x);
  }
  return out;
}

function decodeValue(v: Json): unknown {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map(decodeValue);
  const m = v.$m;
  if (m !== undefined && Object.keys(v).length === 1 && Array.isArray(m)) {
    return new Map(
      m.map((pair) => {
        const [k, x] = pair as [Json, Json];
        return [decodeValue(k), decodeValue(x)];
      }),
    );
  }
  const s = v.$s;
  if (s !== undefined && Object.keys(v).length === 1 && Array.isArray(s)) {
    return new Set(s.map(decodeValue));
  }
  const out: Record<string, unknown> = {};
  for (const k in v) out[k] = decodeValue(v[k]!);
  return out;
}

/**
 * The replica as one JSON string (config included: joiners check it matches
 * theirs). Written straight to text, the same text as
 * `JSON.stringify(encodeValue(cs))` without building the tagged copy first:
 * every replica encodes its state at each checkpoint (bench/README.md).
 */
export function encodeSnapshot(cs: ClusterState): string {
  const out: string[] = [];
  writeValue(cs, (text) => out.push(text));
  return out.join("");
}

/** Receives the snapshot's text piece by piece. */
type Sink = (text: string) => void;

/** Writes the JSON of `encodeValue(v)` to `put`. */
function writeValue(v: unknown, put: Sink): void {
  if (v === null || v === undefined) return put("null");
  if (typeof v === "number") {
    // JSON's own text for a number (the common case, without the call).
    return put(Number.isFinite(v) ? String(v) : "null");
  }
  if (typeof v !== "object") return put(JSON.stringify(v));
  if (v instanceof Map) {
    put('{"$m":[');
    let first = true;
    for (const [k, x] of v) {
      put(first ? "[" : ",[");
      first = false;
      writeValue(k, put);
      put(",");
      writeValue(x, put);
      put("]");
    }
    return put("]}");
  }
  if (v instanceof Set) {
    put('{"$s":[');
    let first = true;
    for (const x of v) {
      if (!first) put(",");
      first = false;
      writeValue(x, put);
    }
    return put("]}");
  }
  if (Array.isArray(v)) {
    put("[");
    for (let i = 0; i < v.length; i++) {
      if (i > 0) put(",");
      writeValue(v[i], put);
    }
    return put("]");
  }
  put("{");
  let first = true;
  for (const k in v) {
    const x = (v as Record<string, unknown>)[k];
    if (x === undefined) continue;
    put(first ? JSON.stringify(k) + ":" : "," + JSON.stringify(k) + ":");
    first = false;
    writeValue(x, put);
  }
  put("}");
}

export function decodeSnapshot(text: string): ClusterState {
  return decodeValue(JSON.parse(text) as Json) as ClusterState;
}

const FNV_START = 0x811c9dc5;

function fnv(h: number, text: string): number {
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  return h;
}

function hex(h: number): string {
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** FNV-1a (32-bit) over the snapshot text: cheap, deterministic, no crypto needed. */
export function digestOf(text: string): string {
  return hex(fnv(FNV_START, text));
}

/** `digestOf(encodeSnapshot(cs))`, folded as it is written: no text kept. */
export function stateDigest(cs: ClusterState): string {
  let h = FNV_START;
  writeValue(cs, (text) => h = fnv(h, text));
  return hex(h);
}

/** Config fingerprint: replicas reducing one log must share it exactly. */
export function configDigest(config: unknown): string {
  return digestOf(JSON.stringify(encodeValue(config)));
}
