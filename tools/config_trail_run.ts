// How far the server's configuration travels (issue 27; counting in
// tools/config_trail.ts): starts the relay with every option that routes read
// set, wraps the configuration so each field read records its call stack, sends
// one request of every route family, shuts down, and gives the modules the
// configuration passed through and the returns. Print them with:
//   npx -y deno@2.9.6 run --allow-net=127.0.0.1 --allow-read --allow-env tools/config_trail_run.ts
// shell/server/config_trail_test.ts keeps the returns at none.
import { registeredWorker, testConfig } from "../shell/server/_test_helpers.ts";
import {
  admin,
  ADMIN_TOKEN,
  autoRespond,
  startTestRelay,
} from "../shell/server/_relay_test_helpers.ts";
import type { ServerConfig } from "../shell/server/config.ts";
import { chainOf, type Trail, trailOf } from "./config_trail.ts";

const ROOT = new URL("../", import.meta.url).href;

/** The configuration and every object or array in it, each read's stack pushed to `stacks`. */
function traced<T extends object>(value: T, stacks: string[]): T {
  return new Proxy(value, {
    get(target, key, receiver) {
      stacks.push(new Error().stack ?? "");
      const v = Reflect.get(target, key, receiver);
      // The core is handed its part once and reads it on every event: that is
      // the core's own business, not the assembly's.
      if (key === "core" || typeof v !== "object" || v === null) return v;
      return traced(v, stacks);
    },
  });
}

/** One run of the relay through every route family: the trail and how many reads it saw. */
export async function measureTrail(): Promise<Trail & { reads: number }> {
  const stacks: string[] = [];
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 200;
  try {
    const relay = await startTestRelay(traced<ServerConfig>(
      testConfig({}, {
        adminToken: ADMIN_TOKEN,
        requireApiKeys: true,
        metricsToken: "metrics-token",
        corsAllowOrigins: ["https://app.example"],
      }),
      stacks,
    ));
    const worker = await registeredWorker(relay);
    const stop = autoRespond(worker);
    const created = await admin(relay, "/admin/keys", {
      method: "POST",
      body: JSON.stringify({ name: "trail" }),
    });
    const { key } = await created.json() as { key: string };
    const asClient = { authorization: `Bearer ${key}` };
    const calls: [string, RequestInit][] = [
      ["/health", {}],
      ["/v1/models", { headers: asClient }],
      ["/v1/capabilities", { headers: asClient }],
      ["/metrics", { headers: { authorization: "Bearer metrics-token" } }],
      ["/admin/workers", {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      }],
      ["/admin/stats", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }],
      ["/dashboard", {}],
      ["/setup/status", {}],
      ["/v1/models/load", { method: "POST", headers: asClient, body: "{}" }],
      ["/v1/chat/completions", {
        method: "OPTIONS",
        headers: {
          origin: "https://app.example",
          "access-control-request-method": "POST",
        },
      }],
      ["/v1/chat/completions", {
        method: "POST",
        headers: { ...asClient, "content-type": "application/json" },
        body: JSON.stringify({ model: "m1", messages: [] }),
      }],
    ];
    for (const [path, init] of calls) {
      await (await fetch(`${relay.url}${path}`, init)).body?.cancel();
    }
    stop();
    worker.ws.close();
    await relay.shutdown();
  } finally {
    Error.stackTraceLimit = limit;
  }
  return {
    ...trailOf(stacks.map((s) => chainOf(s, ROOT))),
    reads: stacks.length,
  };
}

if (import.meta.main) {
  const trail = await measureTrail();
  console.log(`configuration reads: ${trail.reads}`);
  console.log(`modules passed through: ${trail.modules.length}`);
  for (const m of trail.modules) console.log(`  ${m}`);
  console.log(`returns to a module it had left: ${trail.returns.length}`);
  for (const r of trail.returns) console.log(`  ${r}`);
}
