// Does this Redis keep the log (issue 23)? Checked at start and after every
// reconnect (a failover lands on another server, with its own settings):
// - an eviction policy that may pick any key (allkeys-*) deletes the log, the
//   snapshot and the API keys when memory runs short: the cluster then
//   forgets requests and keys without a word. Refused at start (the fix is one
//   CONFIG SET); after a reconnect, an error line (a running fleet is not
//   stopped for it). noeviction and volatile-* are fine: the relay's only keys
//   with a time to live are op-token nonces, whose eviction is said in the
//   README.
// - no persistence (neither AOF nor RDB save points): a Redis restart empties
//   the log and the API keys. A warning only: the cluster recovers from an
//   empty log (a new epoch), and a Sentinel set-up whose replicas keep the data
//   can run that way on purpose.
import type { Redis } from "ioredis";

export type LogSettings = {
  /** null when neither CONFIG nor INFO told (a managed Redis may hide them). */
  maxmemoryPolicy: string | null;
  appendonly: boolean | null;
  /** RDB save points ("" = none); null when CONFIG is disabled. */
  save: string | null;
};

export type Problem = { severity: "refuse" | "warn"; message: string };

const KEEPS_KEYS = /^(noeviction|volatile-(lru|lfu|random|ttl))$/;

export function logKeepingProblems(s: LogSettings): Problem[] {
  const out: Problem[] = [];
  if (s.maxmemoryPolicy === null) {
    out.push({
      severity: "warn",
      message:
        "could not read Redis's maxmemory-policy: make sure it is noeviction (or volatile-*), or Redis may evict the cluster's log and API keys",
    });
  } else if (!KEEPS_KEYS.test(s.maxmemoryPolicy)) {
    out.push({
      severity: "refuse",
      message:
        `Redis's maxmemory-policy is ${s.maxmemoryPolicy}: it may evict the cluster's log, snapshot and API keys when memory runs short; set it to noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)`,
    });
  }
  if (s.appendonly === true || (s.save !== null && s.save.trim() !== "")) {
    return out;
  }
  out.push({
    severity: "warn",
    message: s.appendonly === null || s.save === null
      ? "could not read Redis's persistence settings: make sure AOF (appendonly yes) or RDB save points are on, or a Redis restart empties the cluster's log and API keys"
      : "Redis keeps nothing on disk (appendonly no, no save points): a restart empties the cluster's log and API keys; turn on appendonly yes (or RDB save points)",
  });
  return out;
}

/** Reads the settings with CONFIG GET, else from INFO (CONFIG may be renamed away). */
export async function readLogSettings(r: Redis): Promise<LogSettings> {
  try {
    const [policy, aof, save] = await Promise.all(
      ["maxmemory-policy", "appendonly", "save"].map((k) =>
        r.config("GET", k) as Promise<string[]>
      ),
    );
    return {
      maxmemoryPolicy: policy?.[1] ?? null,
      appendonly: aof?.[1] === undefined ? null : aof[1] === "yes",
      save: save?.[1] ?? null,
    };
  } catch {
    const info = (await r.info("memory")) + (await r.info("persistence"));
    const field = (name: string) =>
      new RegExp(`^${name}:(.*)$`, "m").exec(info)?.[1]?.trim() ?? null;
    const aof = field("aof_enabled");
    return {
      maxmemoryPolicy: field("maxmemory_policy"),
      appendonly: aof === null ? null : aof === "1",
      save: null,
    };
  }
}
