// Client API keys shared by a cluster (issue 16). Each instance keeps a local
// mirror, so `verify` stays synchronous and costs a Map lookup; the engine's
// record hash keeps keys across restarts (Redis with AOF on), and a note in the
// log carries each creation and revocation to every instance, at one log
// position: a key revoked on one instance is refused on all within a log hop.
import {
  type ApiKeyInfo,
  type CreatedKey,
  hashKey,
  KEY_PREFIX,
  type KeyLimitsText,
  type KeyScope,
  type KeyStore,
  newKey,
  parseKeyLimits,
  UNSCOPED,
  type VerifiedKey,
} from "../ops/api_keys.ts";
import { isPriority } from "../http/tenancy.ts";
import type { Logger } from "../../log.ts";
import type { ClusterEngine } from "./engine.ts";
import type { ClusterRuntime, Note } from "./runtime.ts";

type Stored = ApiKeyInfo & { hash: string };

export class ClusterKeyStore implements KeyStore {
  readonly #byHash = new Map<string, Stored>();
  readonly #byId = new Map<string, Stored>();
  #cluster: ClusterRuntime | null = null;
  #engine: ClusterEngine | null = null;
  readonly #log: Logger;

  constructor(log: Logger) {
    this.#log = log;
  }

  /** Loads every stored key, then follows the log's key notes. */
  async attach(cluster: ClusterRuntime, engine: ClusterEngine): Promise<void> {
    this.#cluster = cluster;
    this.#engine = engine;
    cluster.onNote((note) => this.#apply(note));
    // Redis came back empty (no AOF): the mirror follows what it now holds.
    cluster.onRejoined((fresh) => {
      if (fresh) {
        this.#load(engine, true).catch((e) =>
          this.#log("warn", "API keys not reloaded", { error: String(e) })
        );
      }
    });
    await this.#load(engine, false);
  }

  async #load(engine: ClusterEngine, replace: boolean): Promise<void> {
    const all = await engine.recordsAll();
    if (replace) {
      this.#byHash.clear();
      this.#byId.clear();
    }
    let tenantless = 0;
    for (const text of Object.values(all)) {
      try {
        const s = JSON.parse(text) as Stored;
        this.#put(s);
        if (s.tenant === null && s.mayNameTenants === undefined) tenantless++;
      } catch {
        this.#log("warn", "unreadable API key record in the cluster", {});
      }
    }
    if (tenantless > 0) {
      this.#log(
        "info",
        "API keys without a tenant are now each their own tenant and may no longer name tenants with X-Tenant-ID (issue 24); create a key with may_name_tenants for a gateway that must",
        { keys: tenantless },
      );
    }
  }

  #put(s: Stored): void {
    this.#byHash.set(s.hash, s);
    this.#byId.set(s.id, s);
  }

  #drop(id: string): boolean {
    const s = this.#byId.get(id);
    if (s === undefined) return false;
    this.#byId.delete(id);
    this.#byHash.delete(s.hash);
    return true;
  }

  #apply(note: Note): void {
    switch (note.t) {
      case "keyCreated": {
        const maxPriority = note.maxPriority;
        this.#put({
          id: note.id,
          name: note.name,
          hash: note.hash,
          createdAtMs: note.createdAtMs,
          lastUsedAtMs: null,
          tenant: note.tenant,
          maxPriority: isPriority(maxPriority) ? maxPriority : "normal",
          mayNameTenants: note.mayNameTenants === 1,
          prefix: note.prefix,
          rateLimit: note.rateLimit,
          tokenBudget: note.tokenBudget,
        });
        return;
      }
      case "keyRevoked":
        this.#drop(note.id);
        return;
      default:
        return; // the instance's own notes
    }
  }

  #engineOrThrow(): { cluster: ClusterRuntime; engine: ClusterEngine } {
    if (this.#cluster === null || this.#engine === null || !this.#cluster.up) {
      throw new Error("the relay cluster is unavailable");
    }
    return { cluster: this.#cluster, engine: this.#engine };
  }

  create(
    name: string,
    nowMs: number,
    scope: KeyScope = UNSCOPED,
    limits: KeyLimitsText = {},
  ): CreatedKey {
    const { cluster, engine } = this.#engineOrThrow();
    const { created: { key, ...info }, hash } = newKey(
      name,
      nowMs,
      scope,
      limits,
    );
    const id = info.id;
    const stored: Stored = { ...info, hash };
    this.#put(stored);
    // Stored first, announced second: an instance that loads the records and
    // then follows the log never misses a key.
    engine.recordSet(id, JSON.stringify(stored)).then(() =>
      cluster.appendNote({
        t: "keyCreated",
        id,
        name,
        hash: stored.hash,
        createdAtMs: nowMs,
        tenant: stored.tenant,
        maxPriority: stored.maxPriority,
        mayNameTenants: stored.mayNameTenants ? 1 : 0,
        prefix: stored.prefix,
        rateLimit: stored.rateLimit ?? null,
        tokenBudget: stored.tokenBudget ?? null,
      })
    ).catch((e) =>
      this.#log("error", "API key not shared with the cluster", {
        id,
        error: String(e),
      })
    );
    return { ...info, key };
  }

  list(): ApiKeyInfo[] {
    return [...this.#byId.values()]
      .map(({ hash: _hash, ...info }) => ({ ...info }))
      .sort((a, b) => a.createdAtMs - b.createdAtMs || (a.id < b.id ? -1 : 1));
  }

  revoke(id: string): boolean {
    const { cluster, engine } = this.#engineOrThrow();
    if (!this.#drop(id)) return false;
    engine.recordDelete(id).then(() =>
      cluster.appendNote({ t: "keyRevoked", id })
    ).catch((e) =>
      this.#log("error", "API key revocation not shared with the cluster", {
        id,
        error: String(e),
      })
    );
    return true;
  }

  verify(key: string): VerifiedKey | null {
    if (!key.startsWith(KEY_PREFIX)) return null;
    const s = this.#byHash.get(hashKey(key));
    if (s === undefined) return null;
    let limits;
    try {
      limits = parseKeyLimits(s);
    } catch {
      limits = { rateLimit: null, tokenRateLimit: null, tokenBudget: null };
    }
    return {
      id: s.id,
      name: s.name,
      tenant: s.tenant,
      maxPriority: s.maxPriority,
      // Records from before issue 24 lack the flag: the safe behaviour.
      mayNameTenants: s.mayNameTenants === true,
      limits,
    };
  }

  /** Last use is kept per instance (a shared write per request would cost a round trip). */
  touch(id: string, nowMs: number): void {
    const s = this.#byId.get(id);
    if (s !== undefined) s.lastUsedAtMs = nowMs;
  }

  close(): void {}
}
