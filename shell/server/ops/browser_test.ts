// C37 in a real browser: playwright-core driving Debian's Chromium (see
// _chromium.ts for how it is found or installed). Screenshots go to
// $MODELRELAY_SCREENSHOT_DIR, else a fresh temporary directory; the path is printed.
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import {
  ADMIN_TOKEN,
  autoRespond,
  postKey,
  startTestRelay,
} from "../_relay_test_helpers.ts";
import { withBrowserAndRelay } from "./_browser_relay.ts";
import { launchBrowser } from "./_chromium.ts";
import { chatBody, registeredWorker, testConfig } from "../_test_helpers.ts";

let screenshotDir: string | null = null;

async function screenshot(page: Page, name: string): Promise<string> {
  screenshotDir ??= Deno.env.get("MODELRELAY_SCREENSHOT_DIR") ||
    await Deno.makeTempDir({ prefix: "modelrelay-screens-" });
  await Deno.mkdir(screenshotDir, { recursive: true });
  const path = `${screenshotDir}/${name}.png`;
  await page.screenshot({ path, fullPage: true });
  const bytes = await Deno.readFile(path);
  assert.deepEqual([...bytes.slice(1, 4)], [0x50, 0x4e, 0x47], "a PNG");
  console.log(`screenshot: ${path}`);
  return path;
}

/** Script errors, CSP violations and failed loads the page reports, except `expected`. */
function watchErrors(page: Page, expected: RegExp | null = null): string[] {
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    if (expected !== null && expected.test(m.text())) return;
    errors.push(m.text());
  });
  return errors;
}

async function textOf(page: Page, selector: string): Promise<string> {
  return (await page.locator(selector).textContent()) ?? "";
}

const SANITIZE = { sanitizeOps: false, sanitizeResources: false };

Deno.test({
  name:
    "C37 /dashboard asks for the token, then shows a worker appear and the request counter move",
  ...SANITIZE,
  fn: () =>
    withBrowserAndRelay(async (page, relay) => {
      // The wrong token below is answered 403, which the browser logs.
      const errors = watchErrors(page, /status of 403 \(Forbidden\)/);
      const key = await (await postKey(relay, {
        name: "team-a app",
        tenant: "team-a",
        max_priority: "low",
      })).json();
      // Issue 33.11: a key without a tenant is its own tenant; only a
      // gateway's key (may_name_tenants) names tenants.
      const lone = await (await postKey(relay, { name: "lone app" })).json();
      const gateway = await (await postKey(relay, {
        name: "gateway",
        may_name_tenants: true,
      })).json();
      await page.goto(`${relay.url}/dashboard`);
      // A wrong token is refused and the form stays.
      await page.fill("#token", "wrong-token");
      await page.click("#connect");
      await page.locator("#login-error", { hasText: "does not match" })
        .waitFor();
      await page.fill("#token", ADMIN_TOKEN);
      await page.click("#connect");
      await page.locator("#dash").waitFor({ state: "visible" });
      await page.locator("#no-workers").waitFor({ state: "visible" });
      assert.equal(await textOf(page, "#workers-connected"), "0");
      assert.equal(await textOf(page, "#requests-total"), "0");
      // The total depth, now beside the original's map (issue 32).
      assert.equal(await textOf(page, "#queue-depth"), "0");
      // Keys show their tenant and priority ceiling (issue 15).
      const keyRow = page.locator(`#keys tr[data-key-id="${key.id}"]`);
      await keyRow.waitFor();
      assert.match(
        (await keyRow.textContent()) ?? "",
        /team-a app.*team-a.*low/,
      );
      // Its creation time as a date (ISO beside the original's epoch seconds).
      assert.match(
        (await keyRow.textContent()) ?? "",
        /\d{4}-\d\d-\d\d \d\d:\d\d/,
      );
      assert.match(
        (await page.locator(`#keys tr[data-key-id="${lone.id}"]`)
          .textContent()) ?? "",
        new RegExp(`lone app.*its own \\(${lone.id}\\)`),
      );
      assert.match(
        (await page.locator(`#keys tr[data-key-id="${gateway.id}"]`)
          .textContent()) ?? "",
        /gateway.*any \(X-Tenant-ID\)/,
      );
      assert.doesNotMatch(
        (await page.locator("#dash").textContent()) ?? "",
        /one without may name tenants/,
      );

      const w = await registeredWorker(relay, {
        worker_name: "gpu-box-1",
        models: ["llama3.2:3b", "m1"],
        max_concurrent: 4,
      });
      const stop = autoRespond(w);
      const row = page.locator(
        `#workers tr[data-worker-id="${w.ack.worker_id}"]`,
      );
      await row.waitFor();
      assert.match((await row.textContent()) ?? "", /gpu-box-1/);
      assert.match((await row.textContent()) ?? "", /llama3\.2:3b/);
      assert.match(await textOf(page, "#models"), /llama3\.2:3b/);
      assert.equal(await textOf(page, "#workers-connected"), "1");

      for (const stream of [false, true, true]) {
        const res = await fetch(`${relay.url}/v1/chat/completions`, {
          method: "POST",
          body: chatBody("m1", stream),
        });
        await res.text();
      }
      await page.locator("#requests-total", { hasText: /^3$/ }).waitFor();
      // Same counters as /admin/stats.
      assert.equal(relay.metrics.requestsTotal(), 3);
      await page.locator("#latency", { hasText: /ms/ }).waitFor();
      await screenshot(page, "dashboard");
      assert.deepEqual(errors, []);
      stop();
      await w.close();
    }),
});

Deno.test({
  name:
    "C37 /setup shows the worker command for this server and turns green when a worker registers",
  ...SANITIZE,
  fn: () =>
    withBrowserAndRelay(async (page, relay) => {
      const errors = watchErrors(page);
      // An existing worker does not count as the new one.
      const existing = await registeredWorker(relay, { worker_name: "old" });
      await page.goto(`${relay.url}/setup`);
      assert.equal(await textOf(page, "#platform-detected"), "Linux");
      const command = await textOf(page, "#command");
      assert.match(command, new RegExp(`PROXY_URL='${relay.url}' \\\\`));
      assert.match(command, /WORKER_SECRET='your-worker-secret'/);
      assert.match(command, /BACKEND_URL='http:\/\/localhost:11434'/);
      assert.match(command, /MODELS='llama3\.2:3b'/);
      assert.match(command, /\n {2}deno task worker$/);
      await page.fill("#secret", "s3cret");
      await page.selectOption("#runner", "npx");
      await page.selectOption("#backend", "http://localhost:8000");
      const edited = await textOf(page, "#command");
      assert.match(edited, /WORKER_SECRET='s3cret'/);
      assert.match(edited, /BACKEND_URL='http:\/\/localhost:8000'/);
      assert.match(edited, /npx -y deno@2\.9\.6 task worker$/);
      // No models: the worker discovers them from the backend.
      await page.fill("#models", "");
      assert.doesNotMatch(await textOf(page, "#command"), /MODELS=/);
      await page.selectOption("#platform", "windows");
      assert.match(
        await textOf(page, "#command"),
        /^\$env:PROXY_URL = '.*'\n[^]*\nnpx -y deno@2\.9\.6 task worker$/,
      );
      await page.selectOption("#platform", "linux");

      await page.locator("#status-detail", { hasText: /worker/ }).waitFor();
      assert.equal(await page.getAttribute("#status", "class"), "waiting");
      assert.match(await textOf(page, "#status-detail"), /1 worker/);

      const w = await registeredWorker(relay, {
        worker_name: "gpu-box-4",
        models: ["llama3-8b"],
      });
      await page.locator("#status.ok").waitFor();
      assert.match(await textOf(page, "#status"), /llama3-8b/);
      await screenshot(page, "setup");
      assert.deepEqual(errors, []);
      await w.close();
      await existing.close();
    }),
});

Deno.test({
  name:
    "a page on another origin calls /v1/chat/completions with a key and X-Tenant-ID through the CORS preflight",
  ...SANITIZE,
  fn: async () => {
    const relay = await startTestRelay(testConfig({}, {
      adminToken: ADMIN_TOKEN,
      requireApiKeys: true,
    }));
    const app = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      () =>
        new Response("<!doctype html><title>app</title>", {
          headers: { "content-type": "text/html" },
        }),
    );
    let browser;
    const w = await registeredWorker(relay);
    const stop = autoRespond(w);
    try {
      const key =
        (await (await postKey(relay, { name: "web", tenant: "web" })).json())
          .key as string;
      browser = await launchBrowser();
      const page = await browser.context.newPage();
      const errors = watchErrors(page);
      await page.goto(`http://127.0.0.1:${app.addr.port}/`);
      const result = await page.evaluate(async ([url, key]) => {
        const r = await fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
            "x-tenant-id": "web",
            "x-priority": "normal",
          },
          body: JSON.stringify({ model: "m1", messages: [] }),
        });
        return {
          status: r.status,
          wait: r.headers.get("x-queue-wait-ms"),
          body: await r.text(),
        };
      }, [relay.url, key]);
      assert.equal(result.status, 200);
      assert.equal(result.wait, "0", "exposed response header readable");
      assert.match(result.body, /hello/);
      assert.deepEqual(errors, []);
    } finally {
      stop();
      await w.close();
      await browser?.close();
      await app.shutdown();
      await relay.close();
    }
  },
});

/** Answers each request frame with a JSON body and its token counts (prompt 10, completion 5). */
function respondWithUsage(w: Awaited<ReturnType<typeof registeredWorker>>) {
  const onMessage = (e: MessageEvent) => {
    const f = JSON.parse(e.data as string);
    if (f.type !== "request") return;
    w.send({
      type: "response_complete",
      request_id: f.request_id,
      status_code: 200,
      headers: { "content-type": "application/json" },
      body:
        '{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}',
      token_counts: {
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
      },
    });
  };
  w.ws.addEventListener("message", onMessage);
  return () => w.ws.removeEventListener("message", onMessage);
}

Deno.test({
  name:
    "issue 26 /dashboard shows usage by key, tenant and model and a request log that filters",
  ...SANITIZE,
  fn: async () => {
    const relay = await startTestRelay(
      testConfig({}, { adminToken: ADMIN_TOKEN, requireApiKeys: true }),
    );
    let browser;
    try {
      const keys: Array<{ id: string; secret: string }> = [];
      for (
        const [name, tenant] of [["web app", "web"], ["batch jobs", "batch"]]
      ) {
        keys.push(
          await (await postKey(relay, { name, tenant })).json(),
        );
      }
      const w = await registeredWorker(relay, {
        worker_name: "gpu-usage",
        models: ["llama3.2:3b", "qwen2.5:7b"],
        max_concurrent: 4,
      });
      const stop = respondWithUsage(w);
      // web: 1 x llama, batch: 2 x llama + 3 x qwen.
      const plan: Array<[number, string, number]> = [
        [0, "llama3.2:3b", 1],
        [1, "llama3.2:3b", 2],
        [1, "qwen2.5:7b", 3],
      ];
      for (const [k, model, n] of plan) {
        for (let i = 0; i < n; i++) {
          const res = await fetch(`${relay.url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${keys[k]!.secret}` },
            body: chatBody(model, false),
          });
          assert.equal(res.status, 200);
          await res.text();
        }
      }
      browser = await launchBrowser();
      const page = await browser.context.newPage();
      page.setDefaultTimeout(10_000);
      const errors = watchErrors(page);
      await page.goto(`${relay.url}/dashboard`);
      await page.fill("#token", ADMIN_TOKEN);
      await page.click("#connect");
      await page.locator("#dash").waitFor({ state: "visible" });
      const row = (table: string, group: string) =>
        page.locator(`#usage-${table} tr[data-group="${group}"]`);
      await row("tenant", "batch").waitFor();
      assert.match(
        (await row("tenant", "batch").textContent())!,
        /^batch5502?5$/,
      );
      assert.match((await row("tenant", "web").textContent())!, /^web1105$/);
      assert.match(
        (await row("model", "qwen2.5:7b").textContent())!,
        /^qwen2\.5:7b33015$/,
      );
      assert.match((await row("key", keys[0]!.id).textContent())!, /1105$/);
      // The day view counts the same requests.
      await page.selectOption("#usage-period", "86400");
      await row("model", "llama3.2:3b").waitFor();
      assert.match(
        (await row("model", "llama3.2:3b").textContent())!,
        /^llama3\.2:3b33015$/,
      );
      // The request log: newest first, then filtered to one tenant.
      await page.locator("#log tr[data-request-id]").first().waitFor();
      assert.equal(await page.locator("#log tr[data-request-id]").count(), 6);
      assert.match(
        (await page.locator("#log tr[data-request-id]").first().textContent())!,
        /batch jobs.*batch.*qwen2\.5:7b.*gpu-usage.*\/v1\/chat\/completions.*200 completed.*10.*5/,
      );
      await screenshot(page, "dashboard-usage");
      await page.fill("#log-tenant", "web");
      await page.click("#log-filter button[type=submit]");
      await page.locator("#log tr[data-request-id]", { hasText: "web app" })
        .waitFor();
      for (let i = 0; i < 50; i++) {
        if (await page.locator("#log tr[data-request-id]").count() === 1) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(await page.locator("#log tr[data-request-id]").count(), 1);
      await screenshot(page, "dashboard-request-log-filtered");
      assert.deepEqual(errors, []);
      stop();
      await w.close();
    } finally {
      await browser?.close();
      await relay.close();
    }
  },
});
