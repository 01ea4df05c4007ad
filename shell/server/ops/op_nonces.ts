// Op-token nonces on the relay's SQLite database (table op_nonces, schema
// migration 2 in api_keys.ts): a nonce is remembered until its token expires, so
// a replay is refused across restarts; expired rows are pruned as claims come in.
import type { DatabaseSync } from "node:sqlite";
import type { NonceStore } from "./op_token.ts";

export function sqliteNonceStore(db: DatabaseSync): NonceStore {
  const prune = db.prepare("DELETE FROM op_nonces WHERE expires_at_secs < ?");
  const insert = db.prepare(
    "INSERT OR IGNORE INTO op_nonces (nonce, expires_at_secs) VALUES (?, ?)",
  );
  return {
    claim(nonce, nowSecs, expiresAtSecs) {
      prune.run(Math.floor(nowSecs));
      return Number(insert.run(nonce, Math.ceil(expiresAtSecs)).changes) === 1;
    },
  };
}
