// The usage ledger's records as GET /admin/requests lists them (issues 26 and
// 33), for the end-to-end tests that check what a request left behind.
import assert from "node:assert/strict";

export type UsageRecord = {
  id: number;
  request_id: string;
  key_id: string | null;
  key_name: string | null;
  tenant: string;
  model: string;
  worker: string | null;
  endpoint: string;
  outcome: string;
  status: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  estimated: boolean;
};

/** GET /admin/requests?`query` with the admin token: its records, newest first. */
export async function usageRecords(
  serverUrl: string,
  adminToken: string,
  query: string,
): Promise<UsageRecord[]> {
  const r = await fetch(`${serverUrl}/admin/requests?${query}`, {
    headers: { authorization: `Bearer ${adminToken}` },
  });
  const body = await r.json() as { requests: UsageRecord[] };
  assert.equal(r.status, 200, JSON.stringify(body));
  return body.requests;
}
