import assert from "node:assert/strict";
import { verifyOpToken } from "../shell/server/ops/op_token.ts";
import { signedCall } from "./op_token.ts";

const KEY = new TextEncoder().encode("0123456789abcdef-tool-key");
const POLICY = { key: KEY, signers: ["admin1", "admin2"], minSigners: 2 };

function nonces() {
  const seen = new Set<string>();
  return {
    claim: (n: string) => seen.has(n) ? false : (seen.add(n), true),
  };
}

Deno.test("tools/op_token.ts mints a body the relay accepts as signed, and only as signed", () => {
  const body = signedCall(
    { modelId: "big", evictModel: "small", gpuMemoryBudgetMB: 4000 },
    "model-load",
    ["admin1", "admin2"],
    KEY,
    1_000,
    "n1",
  );
  const { verifiedOpToken, modelId, ...params } = body;
  const call = {
    operation: "model-load" as const,
    modelId: modelId as string,
    params,
  };
  const ok = verifyOpToken(verifiedOpToken, call, POLICY, nonces(), 1_010);
  assert.equal("status" in ok, false, JSON.stringify(ok));
  const widened = verifyOpToken(
    verifiedOpToken,
    { ...call, params: { ...params, gpuMemoryBudgetMB: 80000 } },
    POLICY,
    nonces(),
    1_010,
  );
  assert.equal("status" in widened && widened.code, "op_token_params_mismatch");
  assert.throws(
    () => signedCall({ nonce: "x" }, "cache-flush", [], KEY, 1, "n"),
    /nonce cannot be/,
  );
});
