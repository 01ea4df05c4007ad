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

/** The replica as one JSON string (config included: joiners check it matches theirs). */
export function encodeSnapshot(cs: ClusterState): string {
  return JSON.stringify(encodeValue(cs));
}

export function decodeSnapshot(text: string): ClusterState {
  return decodeValue(JSON.parse(text) as Json) as ClusterState;
}

/** FNV-1a (32-bit) over the snapshot text: cheap, deterministic, no crypto needed. */
export function digestOf(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

export function stateDigest(cs: ClusterState): string {
  return digestOf(encodeSnapshot(cs));
}

/** Config fingerprint: replicas reducing one log must share it exactly. */
export function configDigest(config: unknown): string {
  return digestOf(JSON.stringify(encodeValue(config)));
}
