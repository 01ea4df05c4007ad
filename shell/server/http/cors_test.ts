// Issue 15: browser clients can call /v1/* across origins, as with the original.
import assert from "node:assert/strict";
import {
  ADMIN_TOKEN,
  autoRespond,
  postKey,
  startTestRelay,
  withTestRelay,
} from "../_relay_test_helpers.ts";
import { chatBody, registeredWorker, testConfig } from "../_test_helpers.ts";
import { parseCorsOrigins } from "../config.ts";
import { OptionError } from "../../options.ts";

const PAGE = "https://chat.example.com";

function preflight(
  url: string,
  origin: string,
  headers = "authorization, content-type, x-tenant-id, x-stainless-os",
): Promise<Response> {
  return fetch(url, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": headers,
    },
  });
}

Deno.test("CORS preflight is answered, before auth, for every /v1 route", async () => {
  await withTestRelay(
    testConfig({}, {
      adminToken: ADMIN_TOKEN,
      requireApiKeys: true,
    }),
    async (relay) => {
      for (
        const path of [
          "/v1/chat/completions",
          "/v1/messages",
          "/v1/responses",
          "/v1/models",
          "/v1/capabilities",
        ]
      ) {
        const res = await preflight(relay.url + path, PAGE);
        assert.equal(res.status, 204, path);
        await res.body?.cancel();
        assert.equal(res.headers.get("access-control-allow-origin"), "*");
        assert.match(
          res.headers.get("access-control-allow-methods") ?? "",
          /POST/,
        );
        const allowed = (res.headers.get("access-control-allow-headers") ?? "")
          .split(", ");
        for (
          const h of [
            "authorization",
            "content-type",
            "x-api-key",
            "anthropic-version",
            "x-tenant-id",
            "x-priority",
            "x-cache-tag",
            "x-stainless-os",
          ]
        ) assert.ok(allowed.includes(h), `${path} allows ${h}`);
        assert.equal(res.headers.get("access-control-max-age"), "86400");
        assert.equal(res.headers.get("access-control-allow-credentials"), null);
      }
      // Nothing else is opened up: the admin API has no CORS.
      const adminPreflight = await preflight(`${relay.url}/admin/keys`, PAGE);
      assert.equal(
        adminPreflight.headers.get("access-control-allow-origin"),
        null,
      );
      await adminPreflight.body?.cancel();
    },
  );
});

Deno.test("CORS headers are on actual /v1 responses: JSON, streams and errors", async () => {
  const relay = await startTestRelay(testConfig({}, {
    adminToken: ADMIN_TOKEN,
    requireApiKeys: true,
  }));
  const w = await registeredWorker(relay);
  const stop = autoRespond(w);
  try {
    const created = await (await postKey(relay, { name: "web" })).json();
    const call = (body: string, key: string | null) =>
      fetch(`${relay.url}/v1/chat/completions`, {
        method: "POST",
        headers: {
          origin: PAGE,
          "content-type": "application/json",
          ...(key === null ? {} : { authorization: `Bearer ${key}` }),
        },
        body,
      });
    const json = await call(chatBody(), created.key);
    const stream = await call(chatBody("m1", true), created.key);
    const unauthorized = await call(chatBody(), null);
    const unknownModel = await call(chatBody("nope"), created.key);
    const cases: [string, Response, number][] = [
      ["json", json, 200],
      ["stream", stream, 200],
      ["401", unauthorized, 401],
      ["404", unknownModel, 404],
    ];
    for (const [what, res, status] of cases) {
      assert.equal(res.status, status, what);
      await res.text();
      assert.equal(res.headers.get("access-control-allow-origin"), "*", what);
      assert.match(
        res.headers.get("access-control-expose-headers") ?? "",
        /x-queue-wait-ms/,
        what,
      );
    }
    assert.match(stream.headers.get("content-type") ?? "", /event-stream/);
    const models = await fetch(`${relay.url}/v1/models`, {
      headers: { origin: PAGE },
    });
    assert.equal(models.headers.get("access-control-allow-origin"), "*");
    await models.body?.cancel();
  } finally {
    stop();
    await w.close();
    await relay.close();
  }
});

Deno.test("CORS_ALLOW_ORIGINS lists origins: a listed one is echoed with Vary: Origin, others get no CORS", async () => {
  await withTestRelay(
    testConfig({}, { corsAllowOrigins: [PAGE, "http://localhost:5173"] }),
    async (relay) => {
      const ok = await preflight(`${relay.url}/v1/chat/completions`, PAGE);
      assert.equal(ok.status, 204);
      await ok.body?.cancel();
      assert.equal(ok.headers.get("access-control-allow-origin"), PAGE);
      assert.match(ok.headers.get("vary") ?? "", /Origin/);
      const other = await preflight(
        `${relay.url}/v1/chat/completions`,
        "https://evil.example.net",
      );
      assert.equal(other.status, 403);
      assert.equal((await other.json()).error.code, "cors_origin_not_allowed");
      assert.equal(other.headers.get("access-control-allow-origin"), null);
      const actual = await fetch(`${relay.url}/v1/models`, {
        headers: { origin: "https://evil.example.net" },
      });
      assert.equal(actual.headers.get("access-control-allow-origin"), null);
      assert.match(actual.headers.get("vary") ?? "", /Origin/);
      await actual.body?.cancel();
      const listed = await fetch(`${relay.url}/v1/models`, {
        headers: { origin: "http://localhost:5173" },
      });
      assert.equal(
        listed.headers.get("access-control-allow-origin"),
        "http://localhost:5173",
      );
      await listed.body?.cancel();
    },
  );
});

Deno.test("a backend's own CORS headers never override the relay's", async () => {
  const relay = await startTestRelay(
    testConfig({}, { corsAllowOrigins: [PAGE] }),
  );
  const w = await registeredWorker(relay);
  try {
    const pending = fetch(`${relay.url}/v1/chat/completions`, {
      method: "POST",
      headers: { origin: "https://evil.example.net" },
      body: chatBody(),
    });
    const req = await w.next("request");
    w.complete(req, 200, "{}", {
      "content-type": "application/json",
      "access-control-allow-origin": "*",
      "access-control-allow-credentials": "true",
    });
    const res = await pending;
    await res.text();
    assert.equal(res.headers.get("access-control-allow-origin"), null);
    assert.equal(res.headers.get("access-control-allow-credentials"), null);
  } finally {
    await w.close();
    await relay.close();
  }
});

Deno.test("CORS_ALLOW_ORIGINS accepts * or exact origins and names the bad entry", () => {
  assert.deepEqual(parseCorsOrigins("*"), ["*"]);
  assert.deepEqual(parseCorsOrigins(""), ["*"]);
  assert.deepEqual(
    parseCorsOrigins(" https://a.example.com , http://localhost:5173"),
    ["https://a.example.com", "http://localhost:5173"],
  );
  for (
    const bad of ["https://a.example.com/", "a.example.com", "https://x/p"]
  ) {
    assert.throws(
      () => parseCorsOrigins(bad),
      (e: unknown) =>
        e instanceof OptionError && e.message.includes(`"${bad}"`) &&
        e.message.includes("CORS_ALLOW_ORIGINS"),
    );
  }
});
