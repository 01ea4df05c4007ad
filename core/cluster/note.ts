// The notes instances append to the shared log (issue 34): facts ordered with
// the replicated events that no core reduces. One typed union, one decoder: a
// note record's payload stays a flat JSON object on the wire (older instances
// read it as such), and everything that reads one goes through `decodeNote`.
export type ClusterNote =
  /** An instance begins to leave; reading it back means its replica holds all it observed. */
  | { t: "leaving" }
  /** The snapshot writer's digest at checkpoint `id` (replicas compare theirs). */
  | { t: "digest"; id: string; digest: string }
  /** An API key was created (shell/server/cluster/keys.ts); the secret's hash only. */
  | {
    t: "keyCreated";
    id: string;
    name: string;
    hash: string;
    createdAtMs: number;
    tenant: string | null;
    maxPriority: string;
    /** 1 or 0: the note's values are flat. */
    mayNameTenants: number;
    prefix: string | null;
    rateLimit: string | null;
    tokenBudget: string | null;
  }
  | { t: "keyRevoked"; id: string };

/** A note as the log's record carries it. */
export type RawNote = Record<string, string | number | null>;

export function encodeNote(note: ClusterNote): RawNote {
  return { ...note };
}

const str = (v: unknown): string | null => typeof v === "string" ? v : null;

/** The note a record carries, or null for a kind this build does not know (or a malformed one). */
export function decodeNote(raw: RawNote): ClusterNote | null {
  switch (raw.t) {
    case "leaving":
      return { t: "leaving" };
    case "digest": {
      const id = str(raw.id);
      const digest = str(raw.digest);
      return id === null || digest === null
        ? null
        : { t: "digest", id, digest };
    }
    case "keyCreated": {
      const id = str(raw.id);
      if (id === null) return null;
      return {
        t: "keyCreated",
        id,
        name: String(raw.name),
        hash: String(raw.hash),
        createdAtMs: Number(raw.createdAtMs),
        tenant: str(raw.tenant),
        maxPriority: String(raw.maxPriority),
        mayNameTenants: raw.mayNameTenants === 1 ? 1 : 0,
        prefix: str(raw.prefix),
        // Issue 26: a key's own limits (absent from older notes: none).
        rateLimit: str(raw.rateLimit),
        tokenBudget: str(raw.tokenBudget),
      };
    }
    case "keyRevoked": {
      const id = str(raw.id);
      return id === null ? null : { t: "keyRevoked", id };
    }
    default:
      return null;
  }
}
