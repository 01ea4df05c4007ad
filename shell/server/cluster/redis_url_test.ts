// CLUSTER_URL forms, the Redis settings check and the replica count (issue 23):
// pure functions, no Redis needed.
import assert from "node:assert/strict";
import {
  ClusterUrlError,
  parseClusterUrl,
  redactClusterUrl,
} from "./redis_url.ts";
import { logKeepingProblems } from "./redis_checks.ts";
import { onlineReplicas } from "./redis_engine.ts";

Deno.test("CLUSTER_URL: redis://, rediss:// and unix:// name one Redis; redis-sentinel:// names the sentinels and the master", () => {
  assert.deepEqual(parseClusterUrl("redis://u:p%40ss@r.example:6380/2"), {
    kind: "direct",
    options: {
      host: "r.example",
      port: 6380,
      db: 2,
      password: "p@ss",
      username: "u",
    },
  });
  assert.deepEqual(parseClusterUrl("rediss://r.example").options, {
    host: "r.example",
    port: 6379,
    db: 0,
    tls: {},
  });
  assert.deepEqual(parseClusterUrl("unix:///run/redis.sock").options, {
    path: "/run/redis.sock",
  });
  assert.deepEqual(
    parseClusterUrl(
      "redis-sentinel://:secret@10.0.0.1:26379,10.0.0.2,[::1]:26380/relay?db=1&sentinel_password=sp",
    ),
    {
      kind: "sentinel",
      name: "relay",
      options: {
        sentinels: [
          { host: "10.0.0.1", port: 26379 },
          { host: "10.0.0.2", port: 26379 },
          { host: "::1", port: 26380 },
        ],
        name: "relay",
        db: 1,
        password: "secret",
        sentinelPassword: "sp",
      },
    },
  );
  for (
    const bad of [
      "http://r.example",
      "redis-sentinel://h1:26379",
      "redis-sentinel://h1:0/relay",
      "redis://r.example/x",
      "not a url",
    ]
  ) {
    assert.throws(() => parseClusterUrl(bad), ClusterUrlError, bad);
  }
  assert.equal(
    redactClusterUrl("redis-sentinel://u:pw@h:1/m?sentinel_password=x"),
    "redis-sentinel://u:***@h:1/m?sentinel_password=***",
  );
});

Deno.test("Redis settings: an eviction policy that may pick any key is refused, no persistence is a warning, noeviction or volatile-* with AOF or save points is fine", () => {
  const ok = { maxmemoryPolicy: "noeviction", appendonly: true, save: "" };
  assert.deepEqual(logKeepingProblems(ok), []);
  assert.deepEqual(
    logKeepingProblems({ ...ok, maxmemoryPolicy: "volatile-ttl" }),
    [],
  );
  assert.deepEqual(
    logKeepingProblems({ ...ok, appendonly: false, save: "3600 1" }),
    [],
  );
  const lru = logKeepingProblems({ ...ok, maxmemoryPolicy: "allkeys-lru" });
  assert.deepEqual(lru.map((p) => p.severity), ["refuse"]);
  assert.match(lru[0]!.message, /allkeys-lru.*noeviction/);
  const none = logKeepingProblems({ ...ok, appendonly: false, save: "" });
  assert.deepEqual(none.map((p) => p.severity), ["warn"]);
  assert.match(none[0]!.message, /keeps nothing on disk/);
  // CONFIG renamed away and INFO silent: say what could not be checked.
  const hidden = logKeepingProblems({
    maxmemoryPolicy: null,
    appendonly: null,
    save: null,
  });
  assert.deepEqual(hidden.map((p) => p.severity), ["warn", "warn"]);
});

Deno.test("replicas counted for WAIT: online and heard from within 2 s", () => {
  const info = [
    "# Replication",
    "role:master",
    "connected_slaves:3",
    "slave0:ip=10.0.0.2,port=6379,state=online,offset=900,lag=0",
    "slave1:ip=10.0.0.3,port=6379,state=wait_bgsave,offset=0,lag=0",
    "slave2:ip=10.0.0.4,port=6379,state=online,offset=100,lag=9",
    "",
  ].join("\r\n");
  assert.equal(onlineReplicas(info), 1);
  assert.equal(onlineReplicas("role:master\r\nconnected_slaves:0\r\n"), 0);
});
