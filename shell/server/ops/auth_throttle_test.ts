// Issue 33 (MEDIUM 7): the operator tokens are warned about when short, and
// wrong ones are throttled per address like the worker door's secret.
import assert from "node:assert/strict";
import {
  admin,
  ADMIN_TOKEN,
  startTestRelay,
  withTestRelay,
} from "../_relay_test_helpers.ts";
import { testConfig } from "../_test_helpers.ts";
import { startRelay } from "../relay.ts";

const METRICS_TOKEN = "metrics-token-long-enough";

Deno.test("issue 33 a MODELRELAY_ADMIN_TOKEN or METRICS_TOKEN shorter than 16 characters is warned about at start; long ones are not", async () => {
  const started = async (adminToken: string, metricsToken: string) => {
    const warnings: string[] = [];
    const relay = await startRelay(
      testConfig({}, { adminToken, metricsToken }),
      (level, message) => {
        if (level === "warn") warnings.push(message);
      },
    );
    await relay.close();
    return warnings.join("\n");
  };
  const short = await started("abc", "m");
  assert.match(short, /MODELRELAY_ADMIN_TOKEN is shorter than 16 characters/);
  assert.match(short, /METRICS_TOKEN is shorter than 16 characters/);
  const long = await started("a".repeat(16), "m".repeat(16));
  assert.doesNotMatch(long, /TOKEN is shorter than/);
});

Deno.test("issue 33 wrong admin tokens from one address get 429 with Retry-After past the worker door's limit, the right token included; another door is not affected", async () => {
  // The core's AUTH limits, with a window no test run outlasts.
  await withTestRelay(
    testConfig(
      { authFailuresMax: 3, authFailureWindowMs: 3_600_000 },
      { adminToken: ADMIN_TOKEN, metricsToken: METRICS_TOKEN },
    ),
    async (relay) => {
      for (let i = 0; i < 3; i++) {
        const wrong = await admin(relay, "/admin/stats", {}, `guess-${i}`);
        assert.equal(wrong.status, 403);
        await wrong.body?.cancel();
      }
      // A request without a token is no guess: it is not counted.
      const none = await fetch(`${relay.url}/admin/stats`);
      assert.equal(none.status, 403);
      await none.body?.cancel();
      for (const token of ["guess-3", ADMIN_TOKEN]) {
        const throttled = await admin(relay, "/admin/stats", {}, token);
        assert.equal(throttled.status, 429);
        const secs = Number(throttled.headers.get("retry-after"));
        assert.ok(secs > 3000 && secs <= 3600, String(secs));
        const body = await throttled.json();
        assert.equal(body.error.code, "too_many_auth_failures");
      }
      // Failures are counted by the metrics, and the metrics door has its own.
      const m = await fetch(`${relay.url}/metrics`, {
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      });
      assert.equal(m.status, 200);
      assert.match(
        await m.text(),
        /modelrelay_auth_failures_total\{kind="admin_token"\} 4/,
      );
    },
  );
});

Deno.test("issue 33 wrong metrics tokens from one address get 429 past the limit, then the right one too", async () => {
  const relay = await startTestRelay(
    testConfig(
      { authFailuresMax: 3, authFailureWindowMs: 3_600_000 },
      { adminToken: ADMIN_TOKEN, metricsToken: METRICS_TOKEN },
    ),
  );
  const scrape = (token: string) =>
    fetch(`${relay.url}/metrics`, {
      headers: { authorization: `Bearer ${token}` },
    });
  try {
    for (let i = 0; i < 3; i++) {
      const wrong = await scrape(`guess-${i}`);
      assert.equal(wrong.status, 403);
      await wrong.body?.cancel();
    }
    for (const token of ["guess-3", METRICS_TOKEN]) {
      const throttled = await scrape(token);
      assert.equal(throttled.status, 429);
      assert.ok(Number(throttled.headers.get("retry-after")) > 0);
      assert.equal(
        (await throttled.json()).error.code,
        "too_many_auth_failures",
      );
    }
    // The admin door is throttled on its own.
    const stats = await admin(relay, "/admin/stats");
    assert.equal(stats.status, 200);
    await stats.body?.cancel();
  } finally {
    await relay.close();
  }
});
