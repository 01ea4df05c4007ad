// CLUSTER_URL -> ioredis connection options (issues 16 and 23). Four forms:
//   redis://[user:password@]host:port[/db]       one Redis
//   rediss://…                                   the same over TLS
//   unix:///path/to/redis.sock                   one Redis on a unix socket
//   redis-sentinel://[user:password@]host:port,host:port,…/mastername[?db=N&sentinel_password=…]
//                                                 the master Redis Sentinel names
// The last form has several hosts in one authority, which `new URL` refuses,
// so it is split by hand. Its user and password are the master's (and its
// replicas'); `sentinel_password` is the sentinels' own, when they have one.
import type { RedisOptions } from "ioredis";

export type ClusterUrl =
  | { kind: "direct"; options: RedisOptions & { path?: string } }
  | { kind: "sentinel"; options: RedisOptions; name: string };

export class ClusterUrlError extends Error {
  override name = "ClusterUrlError";
}

const SENTINEL =
  /^redis-sentinel:\/\/(?:([^@/]*)@)?([^/?#]+)\/([^/?#]+)\/?(?:\?([^#]*))?$/;

export function parseClusterUrl(url: string): ClusterUrl {
  if (url.startsWith("redis-sentinel:")) return parseSentinel(url);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ClusterUrlError(`CLUSTER_URL is not a URL: ${url}`);
  }
  if (u.protocol === "unix:") {
    return { kind: "direct", options: { path: u.pathname } };
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") {
    throw new ClusterUrlError(
      `CLUSTER_URL must start with redis://, rediss://, unix:// or redis-sentinel:// (got ${u.protocol}//)`,
    );
  }
  return {
    kind: "direct",
    options: {
      host: u.hostname,
      port: Number(u.port || "6379"),
      db: dbNumber(u.pathname.slice(1) || "0"),
      ...credentials(u.username, u.password),
      ...(u.protocol === "rediss:" ? { tls: {} } : {}),
    },
  };
}

function parseSentinel(url: string): ClusterUrl {
  const m = SENTINEL.exec(url);
  if (m === null) {
    throw new ClusterUrlError(
      `CLUSTER_URL: a Sentinel URL reads redis-sentinel://host:port,host:port/mastername (got ${url})`,
    );
  }
  const [, userinfo = "", hosts = "", name = "", query = ""] = m;
  const sentinels = hosts.split(",").map((hp) => {
    const at = hp.lastIndexOf(":");
    const host = at < 0 ? hp : hp.slice(0, at);
    const port = at < 0 ? 26379 : Number(hp.slice(at + 1));
    if (host === "" || !Number.isInteger(port) || port <= 0 || port > 65535) {
      throw new ClusterUrlError(`CLUSTER_URL: bad sentinel address "${hp}"`);
    }
    return { host: host.replace(/^\[(.*)\]$/, "$1"), port };
  });
  const params = new URLSearchParams(query);
  const colon = userinfo.indexOf(":");
  const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
  const password = colon < 0 ? "" : userinfo.slice(colon + 1);
  const sentinelPassword = params.get("sentinel_password");
  return {
    kind: "sentinel",
    name: decodeURIComponent(name),
    options: {
      sentinels,
      name: decodeURIComponent(name),
      db: dbNumber(params.get("db") ?? "0"),
      ...credentials(user, password),
      ...(sentinelPassword === null ? {} : { sentinelPassword }),
    },
  };
}

function dbNumber(text: string): number {
  const db = Number(text);
  if (!Number.isInteger(db) || db < 0) {
    throw new ClusterUrlError(`CLUSTER_URL: bad database number "${text}"`);
  }
  return db;
}

function credentials(
  user: string,
  password: string,
): { username?: string; password?: string } {
  return {
    ...(password === "" ? {} : { password: decodeURIComponent(password) }),
    ...(user === "" ? {} : { username: decodeURIComponent(user) }),
  };
}

/** The URL with its passwords hidden, for log lines and errors. */
export function redactClusterUrl(url: string): string {
  return url.replace(/\/\/([^@/]*):[^@/]*@/, "//$1:***@").replace(
    /sentinel_password=[^&#]*/,
    "sentinel_password=***",
  );
}
