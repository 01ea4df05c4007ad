// Mints a signed lifecycle call (spec 004 op token, issue 15): the request body
// with a `verifiedOpToken` that signs every parameter in it, ready to POST.
//
//   deno run --allow-read tools/op_token.ts --key /etc/safebox/model-api.key \
//     --signers admin1,admin2 --operation model-load \
//     '{"modelId":"meta-llama/Llama-3.1-70B-Instruct","evictModel":"meta-llama/Llama-3.1-8B-Instruct"}' \
//   | curl -s -H 'content-type: application/json' -d @- https://relay.example.com/v1/models/load
//
// The signature proves the minter holds the shared key; `--signers` are the
// names it records as having approved (see shell/server/ops/op_token.ts).
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import type { LifecycleOperation } from "../core/mod.ts";
import {
  encodeOpToken,
  OP_TOKEN_FIELDS,
} from "../shell/server/ops/op_token.ts";

const OPERATIONS: readonly LifecycleOperation[] = [
  "model-load",
  "model-unload",
  "cache-flush",
];

/** The body plus a token signing all of it; throws on a body the relay would refuse. */
export function signedCall(
  body: Record<string, unknown>,
  operation: LifecycleOperation,
  signers: string[],
  key: Uint8Array,
  issuedAt: number,
  nonce: string,
): Record<string, unknown> {
  const { verifiedOpToken: _, ...params } = body;
  const reserved = OP_TOKEN_FIELDS.filter((k) =>
    k !== "modelId" && k in params
  );
  if (reserved.length > 0) {
    throw new Error(`${reserved.join(", ")} cannot be call parameters`);
  }
  const modelId = typeof params.modelId === "string" ? params.modelId : null;
  const token = encodeOpToken(
    { ...params, operation, modelId, issuedAt, signers, nonce },
    key,
  );
  return { ...params, verifiedOpToken: token };
}

function main(): number {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    options: {
      key: { type: "string" },
      signers: { type: "string" },
      operation: { type: "string" },
    },
    allowPositionals: true,
  });
  const operation = values.operation as LifecycleOperation | undefined;
  if (
    values.key === undefined || values.signers === undefined ||
    operation === undefined || !OPERATIONS.includes(operation) ||
    positionals.length !== 1
  ) {
    console.error(
      `usage: tools/op_token.ts --key FILE --signers a,b --operation ${
        OPERATIONS.join("|")
      } '<request body JSON>'`,
    );
    return 2;
  }
  let bytes = Deno.readFileSync(values.key);
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0x0a || bytes[end - 1] === 0x0d)) end--;
  bytes = bytes.slice(0, end);
  const body = JSON.parse(positionals[0]!);
  console.log(JSON.stringify(signedCall(
    body,
    operation,
    values.signers.split(",").map((s) => s.trim()).filter((s) => s !== ""),
    bytes,
    Math.floor(Date.now() / 1000),
    randomBytes(16).toString("hex"),
  )));
  return 0;
}

if (import.meta.main) Deno.exit(main());
