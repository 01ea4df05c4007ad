// Client API keys (C36): `mr-` + 43 base64url characters (256 random bits), shown
// once at creation, stored only as a SHA-256 hash with id, name and times.
// `KeyStore` is kept small so a shared store (Redis, for several relay instances)
// can implement it later; `openSqliteKeyStore` is the embedded one (node:sqlite).
// A key may be bound to a tenant and a priority ceiling (issue 15): the relay
// then counts, limits and queues its requests as that tenant whatever headers
// they carry.
import { createHash, randomBytes } from "node:crypto";
import { DatabaseSync } from "node:sqlite";
import type { Priority, RateLimit, TokenLimit } from "../../../core/mod.ts";
import { parseRateSpec, parseTokenBudget } from "../config.ts";

/**
 * What a key may do: its tenant, its highest priority, and (issue 24) whether
 * it may name tenants with X-Tenant-ID (a trusted gateway's key, created with
 * `may_name_tenants`). A key with neither a tenant nor that flag is its own
 * tenant (`keyTenant`).
 */
export type KeyScope = {
  tenant: string | null;
  maxPriority: Priority;
  mayNameTenants: boolean;
};

export const UNSCOPED: KeyScope = {
  tenant: null,
  maxPriority: "normal",
  mayNameTenants: false,
};

/**
 * The tenant a key's requests are (issue 24): its bound tenant; none (headers
 * decide) only for a key that may name tenants; else the key itself, by id
 * (unique, and a valid X-Tenant-ID), so a tenantless key has its own limits and
 * cannot spend another tenant's.
 */
export function keyTenant(key: KeyScope & { id: string }): string | null {
  if (key.tenant !== null) return key.tenant;
  return key.mayNameTenants ? null : key.id;
}

/**
 * A key's own limits as given to POST /admin/keys (issue 26), in the env
 * syntax: `rate_limit` "100req/min,20000tok/min", `token_budget`
 * "5000000tok/day"; null = none. Optional: a store without them has none.
 */
export type KeyLimitsText = {
  rateLimit?: string | null;
  tokenBudget?: string | null;
};

export type ApiKeyInfo = KeyScope & KeyLimitsText & {
  id: string;
  name: string;
  createdAtMs: number;
  lastUsedAtMs: number | null;
  /** The key's first KEY_DISPLAY_PREFIX_CHARS characters; null for keys made before it was kept. */
  prefix: string | null;
};

export type CreatedKey = ApiKeyInfo & { key: string };

/** A live key: its id and scope (and, issue 26, its name and limits where the store keeps them). */
export type VerifiedKey = KeyScope & {
  id: string;
  name?: string;
  limits?: KeyLimits;
};

/** A key's limits parsed, as the core applies them. */
export type KeyLimits = {
  rateLimit: RateLimit | null;
  tokenRateLimit: TokenLimit | null;
  tokenBudget: TokenLimit | null;
};

/** Parses a key's limit texts; throws OptionError naming the field when one is malformed. */
export function parseKeyLimits(t: KeyLimitsText): KeyLimits {
  const rate = t.rateLimit == null
    ? { req: null, tok: null }
    : parseRateSpec('"rate_limit"', t.rateLimit);
  return {
    rateLimit: rate.req,
    tokenRateLimit: rate.tok,
    tokenBudget: t.tokenBudget == null
      ? null
      : parseTokenBudget('"token_budget"', t.tokenBudget),
  };
}

export interface KeyStore {
  create(
    name: string,
    nowMs: number,
    scope?: KeyScope,
    limits?: KeyLimitsText,
  ): CreatedKey;
  list(): ApiKeyInfo[];
  /** false when no key has this id. */
  revoke(id: string): boolean;
  /** The key's id and scope when `key` is a live key, else null. */
  verify(key: string): VerifiedKey | null;
  /** Records a use; implementations may coarsen writes. */
  touch(id: string, nowMs: number): void;
  close(): void;
}

export const KEY_PREFIX = "mr-";
export const KEY_NAME_MAX = 100;
/** What identifies a key to people (the original's `prefix`): "mr-" and 8 random characters. */
export const KEY_DISPLAY_PREFIX_CHARS = 11;
/** last_used is written at most this often per key, so requests don't each write to disk. */
export const TOUCH_RESOLUTION_MS = 60_000;

export class KeyStoreError extends Error {}

export function newApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString("base64url");
}

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/**
 * A new key named `name`, made at `nowMs`: what POST /admin/keys shows once
 * (the key itself with what is listed of it) and the hash a store keeps in
 * its place. Both stores, SQLite here and the cluster's (cluster/keys.ts),
 * keep exactly this.
 */
export function newKey(
  name: string,
  nowMs: number,
  scope: KeyScope,
  limits: KeyLimitsText,
): { created: CreatedKey; hash: string } {
  const key = newApiKey();
  return {
    created: {
      ...scope,
      id: "key_" + randomBytes(8).toString("hex"),
      name,
      createdAtMs: nowMs,
      lastUsedAtMs: null,
      prefix: key.slice(0, KEY_DISPLAY_PREFIX_CHARS),
      rateLimit: limits.rateLimit ?? null,
      tokenBudget: limits.tokenBudget ?? null,
      key,
    },
    hash: hashKey(key),
  };
}

/**
 * Schema migrations: MIGRATIONS[i] takes the database from version i to i + 1.
 * Append, never edit, once released.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     key_hash TEXT NOT NULL UNIQUE,
     created_at_ms INTEGER NOT NULL,
     last_used_at_ms INTEGER
   )`,
  // Op-token nonces (spec 004 replay protection), kept until their token expires.
  `CREATE TABLE op_nonces (
     nonce TEXT PRIMARY KEY,
     expires_at_secs INTEGER NOT NULL
   )`,
  // Keys bound to a tenant and a priority ceiling (issue 15); existing keys stay
  // unbound (tenant NULL: they may name tenants as before) with ceiling normal.
  `ALTER TABLE api_keys ADD COLUMN tenant TEXT;
   ALTER TABLE api_keys ADD COLUMN max_priority TEXT NOT NULL DEFAULT 'normal'`,
  // The original's `prefix` of each key, for listings (issue 14); NULL for older keys.
  `ALTER TABLE api_keys ADD COLUMN prefix TEXT`,
  // Issue 24: only keys created with may_name_tenants may name tenants; every
  // existing key gets 0, so a tenantless key becomes its own tenant.
  `ALTER TABLE api_keys ADD COLUMN may_name_tenants INTEGER NOT NULL DEFAULT 0`,
  // Issue 26: a key's own limits (as given), and the usage ledger: one row per
  // finished request, the newest found by id (the cursor of GET /admin/requests).
  `ALTER TABLE api_keys ADD COLUMN rate_limit TEXT;
   ALTER TABLE api_keys ADD COLUMN token_budget TEXT;
   CREATE TABLE usage_records (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     at_ms INTEGER NOT NULL,
     request_id TEXT NOT NULL,
     key_id TEXT,
     key_name TEXT,
     tenant TEXT NOT NULL,
     model TEXT NOT NULL,
     model_served TEXT NOT NULL,
     worker TEXT,
     endpoint TEXT NOT NULL,
     outcome TEXT NOT NULL,
     status INTEGER NOT NULL,
     queue_wait_ms INTEGER NOT NULL,
     first_byte_ms INTEGER,
     duration_ms INTEGER NOT NULL,
     prompt_tokens INTEGER,
     completion_tokens INTEGER,
     cached_tokens INTEGER,
     estimated INTEGER NOT NULL
   );
   CREATE INDEX usage_records_at ON usage_records (at_ms)`,
];
/** The schema version that made tenantless keys their own tenants (issue 24). */
const SAFE_KEYS_VERSION = 5;
export const SCHEMA_VERSION = MIGRATIONS.length;

type Row = Record<string, unknown>;

const PRIORITIES: readonly Priority[] = ["high", "normal", "low"];

function scopeFromRow(r: Row): KeyScope {
  const p = String(r.max_priority);
  return {
    tenant: r.tenant === null ? null : String(r.tenant),
    // An unknown value (written by hand) gets the least privilege.
    maxPriority: PRIORITIES.includes(p as Priority) ? p as Priority : "low",
    mayNameTenants: Number(r.may_name_tenants) === 1,
  };
}

function infoFromRow(r: Row): ApiKeyInfo {
  return {
    ...scopeFromRow(r),
    rateLimit: r.rate_limit == null ? null : String(r.rate_limit),
    tokenBudget: r.token_budget == null ? null : String(r.token_budget),
    id: String(r.id),
    name: String(r.name),
    createdAtMs: Number(r.created_at_ms),
    lastUsedAtMs: r.last_used_at_ms === null ? null : Number(r.last_used_at_ms),
    prefix: r.prefix === null || r.prefix === undefined
      ? null
      : String(r.prefix),
  };
}

function describe(path: string): string {
  return path === ":memory:" ? "the in-memory key database" : `"${path}"`;
}

/** Something an upgrade changed that the operator should hear about (issue 24). */
export type MigrationNote = (
  message: string,
  fields: Record<string, string | number>,
) => void;

/** Brings the schema to SCHEMA_VERSION; refuses files that are not ours or are newer. */
function migrate(db: DatabaseSync, path: string, note?: MigrationNote): void {
  const tables = db.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table'",
  ).all().map((r) => String(r.name));
  let version = 0;
  if (tables.includes("schema_version")) {
    const row = db.prepare("SELECT version FROM schema_version").get();
    version = row === undefined ? 0 : Number(row.version);
  } else if (tables.length > 0) {
    throw new KeyStoreError(
      `${
        describe(path)
      } is an SQLite database but not a ModelRelay key database (tables: ${
        tables.join(", ")
      }); it was left untouched: point MODELRELAY_DB_PATH (--db-path) at another file`,
    );
  }
  if (version > SCHEMA_VERSION) {
    throw new KeyStoreError(
      `${
        describe(path)
      } has key database schema version ${version}, newer than this build knows (${SCHEMA_VERSION}); upgrade ModelRelay or use another MODELRELAY_DB_PATH`,
    );
  }
  if (version === SCHEMA_VERSION) return;
  db.exec("BEGIN IMMEDIATE");
  try {
    if (version === 0) {
      db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER)");
      db.exec("DELETE FROM schema_version");
      db.exec("INSERT INTO schema_version (version) VALUES (0)");
    }
    for (let v = version; v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v]!);
    db.prepare("UPDATE schema_version SET version = ?").run(SCHEMA_VERSION);
    db.exec("COMMIT");
  } catch (e) {
    db.exec("ROLLBACK");
    throw e;
  }
  if (version > 0 && version < SAFE_KEYS_VERSION) noteSafeKeys(db, note);
}

function noteSafeKeys(db: DatabaseSync, note?: MigrationNote): void {
  const row = db.prepare(
    "SELECT COUNT(*) AS n FROM api_keys WHERE tenant IS NULL",
  ).get();
  const n = Number(row?.n ?? 0);
  if (n === 0) return;
  note?.(
    "API keys without a tenant are now each their own tenant and may no longer name tenants with X-Tenant-ID (issue 24); create a key with may_name_tenants for a gateway that must",
    { keys: n },
  );
}

/**
 * Opens (creating on first start) the key database at `path`, or `:memory:`.
 * Throws KeyStoreError with a one-line explanation when the file cannot be read,
 * is not a database, or is damaged; such a file is never modified or replaced.
 */
export function openSqliteKeyStore(
  path: string,
  note?: MigrationNote,
): KeyStore {
  return keyStoreOn(openRelayDatabase(path, note));
}

/** The key store on an open relay database (shared with the op-token nonces). */
export function keyStoreOn(db: DatabaseSync): KeyStore {
  return new SqliteKeyStore(db);
}

/**
 * Makes the database file readable by its owner only (0600): it holds key hashes
 * and the tenants they are bound to. A new file is created so before SQLite
 * opens it; SQLite gives its -journal/-wal/-shm files the database file's mode.
 * An older, wider file is narrowed. No-op where modes do not exist (Windows).
 */
function ownerOnly(path: string): void {
  try {
    Deno.openSync(path, { write: true, createNew: true, mode: 0o600 }).close();
    return;
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
  }
  if (Deno.build.os === "windows") return;
  const mode = Deno.statSync(path).mode;
  if (mode === null || (mode & 0o077) === 0) return;
  try {
    Deno.chmodSync(path, mode & 0o700);
  } catch {
    // Not ours to change (another owner): SQLite's own open decides.
  }
}

/** How long the relay's connection waits for another's lock, where waiting is allowed. */
const BUSY_TIMEOUT_MS = 2000;

/**
 * `write` with SQLite's busy wait off (issue 33): the connection is
 * synchronous, on the event loop, so a lock held by another connection (a
 * sqlite3 session, a backup) would freeze every stream for the whole wait.
 * Refused at once instead; the caller keeps or drops what it wanted to write.
 */
export function withoutWaiting<T>(db: DatabaseSync, write: () => T): T {
  db.exec("PRAGMA busy_timeout = 0");
  try {
    return write();
  } finally {
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}

/**
 * Opens (creating on first start) the relay database at `path` and brings its
 * schema up to date; same errors as openSqliteKeyStore.
 */
export function openRelayDatabase(
  path: string,
  note?: MigrationNote,
): DatabaseSync {
  let db: DatabaseSync;
  try {
    if (path !== ":memory:") ownerOnly(path);
    db = new DatabaseSync(path);
  } catch (e) {
    throw new KeyStoreError(
      `cannot open the API key database ${describe(path)}: ${
        (e as Error).message
      } (check that the directory exists and is writable, or set MODELRELAY_DB_PATH)`,
    );
  }
  try {
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    const check = db.prepare("PRAGMA quick_check").all();
    const verdict = check.map((r) => String(Object.values(r)[0])).join("; ");
    if (verdict !== "ok") throw new Error(`integrity check failed: ${verdict}`);
    migrate(db, path, note);
  } catch (e) {
    db.close();
    if (e instanceof KeyStoreError) throw e;
    throw new KeyStoreError(
      `the API key database ${describe(path)} is unreadable or damaged: ${
        (e as Error).message
      }; it was left untouched: restore it from a backup, or move it away to start with no keys`,
    );
  }
  return db;
}

class SqliteKeyStore implements KeyStore {
  readonly #db: DatabaseSync;
  readonly #insert;
  readonly #list;
  readonly #delete;
  readonly #byHash;
  readonly #touch;
  /** id -> last_used written, to coarsen writes to TOUCH_RESOLUTION_MS. */
  readonly #touched = new Map<string, number>();

  constructor(db: DatabaseSync) {
    this.#db = db;
    this.#insert = db.prepare(
      "INSERT INTO api_keys (id, name, key_hash, created_at_ms, tenant, max_priority, prefix, may_name_tenants, rate_limit, token_budget) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    );
    this.#list = db.prepare(
      "SELECT id, name, created_at_ms, last_used_at_ms, tenant, max_priority, prefix, may_name_tenants, rate_limit, token_budget FROM api_keys ORDER BY created_at_ms, id",
    );
    this.#delete = db.prepare("DELETE FROM api_keys WHERE id = ?");
    this.#byHash = db.prepare(
      "SELECT id, name, tenant, max_priority, may_name_tenants, rate_limit, token_budget FROM api_keys WHERE key_hash = ?",
    );
    this.#touch = db.prepare(
      "UPDATE api_keys SET last_used_at_ms = ? WHERE id = ?",
    );
  }

  create(
    name: string,
    nowMs: number,
    scope: KeyScope = UNSCOPED,
    limits: KeyLimitsText = {},
  ): CreatedKey {
    const { created: k, hash } = newKey(name, nowMs, scope, limits);
    this.#insert.run(
      k.id,
      k.name,
      hash,
      k.createdAtMs,
      k.tenant,
      k.maxPriority,
      k.prefix,
      k.mayNameTenants ? 1 : 0,
      k.rateLimit ?? null,
      k.tokenBudget ?? null,
    );
    return k;
  }

  list(): ApiKeyInfo[] {
    return this.#list.all().map(infoFromRow);
  }

  revoke(id: string): boolean {
    this.#touched.delete(id);
    return Number(this.#delete.run(id).changes) > 0;
  }

  verify(key: string): VerifiedKey | null {
    if (!key.startsWith(KEY_PREFIX)) return null;
    // Looked up by hash: timing reveals nothing about stored keys' text.
    const row = this.#byHash.get(hashKey(key));
    if (row === undefined) return null;
    const texts = infoFromRow({ ...row, prefix: null });
    let limits: KeyLimits;
    try {
      limits = parseKeyLimits(texts);
    } catch {
      // Written by hand past the admin API's checks: the key stays usable, unlimited by it.
      limits = { rateLimit: null, tokenRateLimit: null, tokenBudget: null };
    }
    return {
      ...scopeFromRow(row),
      id: String(row.id),
      name: texts.name,
      limits,
    };
  }

  touch(id: string, nowMs: number): void {
    const last = this.#touched.get(id);
    if (last !== undefined && nowMs - last < TOUCH_RESOLUTION_MS) return;
    // On the request's path: a locked file skips the note (tried again at the
    // key's next use) rather than holding every stream (issue 33).
    try {
      withoutWaiting(this.#db, () => this.#touch.run(nowMs, id));
      this.#touched.set(id, nowMs);
    } catch {
      // last_used is a hint; the request goes on.
    }
  }

  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
