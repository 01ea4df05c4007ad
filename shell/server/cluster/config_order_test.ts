// Issue 33 (MEDIUM 8): instances started with the same TENANT_* settings join
// one cluster whatever order their environment lists them in. Deno hands a
// process its environment as a hash map, so the order differs from one process
// to the next even for the same command line: before the fix, the configuration
// fingerprint followed it and instances refused to join at random.
import assert from "node:assert/strict";
import { configDigest } from "../../../core/cluster/mod.ts";
import { startServerProcess } from "../../demo/cluster.ts";
import { type Child, waitUntil } from "../../procs.ts";
import { loadServerConfig } from "../config.ts";
import { startRedis } from "./_redis.ts";

/** Six tenants' limits and budgets: two orders agree by chance 1 time in 720 or less. */
const TENANT_SETTINGS: [string, string][] = [
  ["TENANT_RATE_LIMIT_alpha", "100req/min"],
  ["TENANT_RATE_LIMIT_bravo", "200req/min,5000tok/min"],
  ["TENANT_RATE_LIMIT_charlie", "300req/min"],
  ["TENANT_RATE_LIMIT_delta", "400req/min"],
  ["TENANT_TOKEN_BUDGET_alpha", "5000tok/day"],
  ["TENANT_TOKEN_BUDGET_echo", "9000tok/hour"],
  ["TENANT_TOKEN_BUDGET_foxtrot", "7000tok/month"],
  ["TENANT_RATE_LIMIT_golf", "10req/min"],
];

/** The settings rotated by `by` and, for odd `by`, reversed: another order each time. */
function inOrder(by: number): Record<string, string> {
  const rotated = [
    ...TENANT_SETTINGS.slice(by),
    ...TENANT_SETTINGS.slice(0, by),
  ];
  return Object.fromEntries(by % 2 === 1 ? rotated.reverse() : rotated);
}

Deno.test("issue 33 the core settings' fingerprint is the same whatever order the TENANT_* variables come in", () => {
  const digests = new Set<string>();
  for (let by = 0; by < TENANT_SETTINGS.length; by++) {
    const loaded = loadServerConfig(
      [],
      (name) => name === "WORKER_SECRET" ? "order-secret" : undefined,
      { WORKER_SECRET: "order-secret", ...inOrder(by) },
    );
    assert.equal(loaded.help, false);
    if (!loaded.help) digests.add(configDigest(loaded.config.core));
  }
  assert.equal(digests.size, 1, [...digests].join());
});

Deno.test("issue 33 three instances given the same TENANT_* settings in different orders all join one cluster", async () => {
  const redis = await startRedis();
  const started: Child[] = [];
  try {
    const urls: string[] = [];
    for (let by = 0; by < 3; by++) {
      const s = await startServerProcess({
        secret: "order-secret",
        env: { CLUSTER_URL: redis.url, ...inOrder(by) },
      });
      started.push(s.child);
      urls.push(s.url);
    }
    await waitUntil("every instance to see all three", async () => {
      for (const url of urls) {
        const h = await (await fetch(`${url}/health`)).json();
        if (h.cluster?.up !== true || h.cluster.instances !== 3) return false;
      }
      return true;
    });
    assert.equal(urls.length, 3);
  } finally {
    for (const c of started.reverse()) await c.stop(3_000);
    await redis.stop();
  }
});
