// Issue 33.11: GET /admin/usage refuses a time it cannot hold or that is not
// on the calendar with 400, through a real server.
import assert from "node:assert/strict";
import { testConfig } from "../_test_helpers.ts";
import { admin, ADMIN_TOKEN, startTestRelay } from "../_relay_test_helpers.ts";
import { parseTime } from "./usage_http.ts";

Deno.test("issue 33.11 /admin/usage answers 400 for a time past what a Date holds (was 500) and for a day not on the calendar (2026-02-30 was taken as March 2)", async () => {
  const server = await startTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN, usageRetentionDays: 1 }),
  );
  try {
    const ask = async (query: string) => {
      const res = await admin(server, `/admin/usage?${query}`);
      const body = await res.json();
      return { status: res.status, code: body.error?.code ?? null };
    };
    assert.deepEqual(await ask("to=8640000000001"), {
      status: 400,
      code: "invalid_to",
    });
    assert.deepEqual(await ask("from=2026-02-30T00:00:00Z"), {
      status: 400,
      code: "invalid_from",
    });
    assert.deepEqual(await ask("from=2026-02-30"), {
      status: 400,
      code: "invalid_from",
    });
    assert.deepEqual(
      await ask("from=2028-02-29T00:00:00Z&to=2028-03-01T00:00:00Z"),
      {
        status: 200,
        code: null,
      },
    );
  } finally {
    await server.close();
  }
});

Deno.test("issue 33.11 parseTime takes only calendar times a Date can hold", () => {
  assert.equal(parseTime("8640000000"), 8_640_000_000_000);
  assert.equal(parseTime("8640000000000"), 8.64e15);
  assert.equal(parseTime("8640000000001"), null);
  assert.equal(parseTime("2026-02-29T00:00:00Z"), null);
  assert.equal(parseTime("2026-04-31T00:00:00Z"), null);
  assert.equal(parseTime("2026-13-01T00:00:00Z"), null);
  assert.equal(parseTime("2026-11-25T24:00:00Z"), null);
  assert.equal(parseTime("2026-11-25T10:60:00Z"), null);
  assert.equal(parseTime("2026-11-25T10:00:00+24:00"), null);
  assert.equal(
    parseTime("2028-02-29T12:00:00Z"),
    Date.parse("2028-02-29T12:00:00Z"),
  );
});
