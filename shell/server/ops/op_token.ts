// Spec 004 governance: the `verifiedOpToken` every lifecycle call carries.
//
// Token: {"opToken": {"operation", "modelId", "issuedAt", "signers", "nonce",
//                     ...every other parameter of the call},
//         "signature": "..."}
// sent as a JSON object, as a JSON string, or as that JSON base64url-encoded
// (standard base64 is accepted too). Or in the compact JWS form spec 004 says
// to parse ("Parse JWT/JSON", issue 32): `header.payload.signature`, each part
// base64url, the header {"alg":"HS256"} (no other algorithm, never "none"), the
// payload the opToken object itself, and the signature HMAC-SHA256 over the
// text `header.payload` as JWS defines it (not over canonical JSON).
//
// The token signs the whole call (issue 15): besides `modelId`, every field of
// the request body except `verifiedOpToken` itself (scope, tenantId, tag,
// evictModel, quantization, maxContextLength, gpuMemoryBudgetMB, workerId, and
// anything else the body carries, since it all reaches the worker) must appear
// in `opToken` with the same JSON value, and `opToken` may carry no parameter
// the body lacks. So an unused token cannot be widened: change any parameter
// and it no longer matches what the signers approved.
//
// Signature: HMAC-SHA256 with the key file's bytes (trailing CR/LF removed) over
// the canonical JSON of `opToken`: keys sorted at every level, no whitespace,
// JSON.stringify escaping. For a load of the spec's example that is
//   {"evictModel":"meta-llama/Llama-3.1-8B-Instruct","issuedAt":1745880000,
//    "modelId":"meta-llama/Llama-3.1-70B-Instruct","nonce":"abc123",
//    "operation":"model-load","signers":["admin1","admin2"]}
// (one line). The signature is 64 hex digits or 43 base64url characters.
// `modelId` is null for a cache flush not scoped to a model.
//
// What this proves: whoever made the token holds the shared key. The signers
// list is a claim inside the signed payload: M-of-N counts the distinct
// configured names listed there. It records who approved; it does not prove
// cryptographically that N different people signed, since any holder of the
// key can list any names. Keep the key where only the approval process runs.
//
// Checks, in order, each with its own answer (nothing reaches a worker on any):
//   malformed token or field            400 invalid_op_token
//   missing token                       401 missing_op_token
//   bad signature                       401 op_token_bad_signature
//   operation differs from the route    403 op_token_wrong_operation
//   modelId differs from the call       403 op_token_wrong_model
//   another parameter differs           403 op_token_params_mismatch
//   issuedAt more than 5 min off        401 op_token_expired
//   too few configured signers          403 op_token_insufficient_signers
//   nonce seen before                   409 op_token_replayed
// The nonce is recorded only when every other check passed, so a rejected token
// does not burn its nonce.
import { createHmac, timingSafeEqual } from "node:crypto";
import {
  apiError,
  type ClientError,
  type LifecycleOperation,
} from "../../../core/mod.ts";

export const OP_TOKEN_WINDOW_SECS = 300;
export const NONCE_CHARS_MAX = 256;

export type OpToken = {
  operation: string;
  modelId: string | null;
  issuedAt: number;
  signers: string[];
  nonce: string;
};

/** The token's own fields; every other field of `opToken` is a call parameter. */
export const OP_TOKEN_FIELDS: readonly string[] = [
  "operation",
  "modelId",
  "issuedAt",
  "signers",
  "nonce",
];

/** A token with the call's other parameters (evictModel, scope, ...) beside its own fields. */
export type SignedCall = OpToken & Record<string, unknown>;

export type OpTokenError = ClientError;

export type OpTokenPolicy = {
  key: Uint8Array;
  /** The configured signer set (N). */
  signers: readonly string[];
  /** How many distinct configured signers must sign (M). */
  minSigners: number;
};

/** Remembers nonces until their token could no longer be accepted. */
export interface NonceStore {
  /** false when the nonce was seen before; else records it until `expiresAtSecs`. */
  claim(nonce: string, nowSecs: number, expiresAtSecs: number): boolean;
}

/** Canonical JSON: object keys sorted at every level, no whitespace. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
    return `{${
      keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(",")
    }}`;
  }
  return JSON.stringify(value) ?? "null";
}

export function signOpToken(token: SignedCall, key: Uint8Array): string {
  return createHmac("sha256", key).update(canonicalJson(token)).digest("hex");
}

/** A complete token as clients send it, base64url-encoded. */
export function encodeOpToken(token: SignedCall, key: Uint8Array): string {
  return Buffer.from(
    JSON.stringify({ opToken: token, signature: signOpToken(token, key) }),
  ).toString("base64url");
}

function malformed(what: string): OpTokenError {
  return apiError("invalid_op_token", { what });
}

type Parsed = {
  token: OpToken;
  signature: string;
  raw: Record<string, unknown>;
  /** The compact form's `header.payload`, which its signature covers; absent = canonical JSON of `raw`. */
  signingInput?: string;
};

/** A complete token in the compact form `header.payload.signature` (HS256). */
export function encodeCompactOpToken(
  token: SignedCall,
  key: Uint8Array,
): string {
  const part = (v: unknown) =>
    Buffer.from(JSON.stringify(v)).toString("base64url");
  const input = `${part({ alg: "HS256", typ: "JWT" })}.${part(token)}`;
  const sig = createHmac("sha256", key).update(input).digest("base64url");
  return `${input}.${sig}`;
}

const COMPACT = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/;

/** The compact form, turned into the JSON form's outer object, with what it signs. */
function parseCompact(
  m: RegExpExecArray,
): { outer: unknown; signingInput: string } | OpTokenError {
  let header: unknown;
  let payload: unknown;
  try {
    header = JSON.parse(Buffer.from(m[1]!, "base64url").toString("utf8"));
    payload = JSON.parse(Buffer.from(m[2]!, "base64url").toString("utf8"));
  } catch {
    return malformed("the compact form's header or payload is not JSON");
  }
  if ((header as { alg?: unknown } | null)?.alg !== "HS256") {
    return malformed('the compact form\'s header must say "alg":"HS256"');
  }
  return {
    outer: { opToken: payload, signature: m[3]! },
    signingInput: `${m[1]}.${m[2]}`,
  };
}

export function parseOpToken(input: unknown): Parsed | OpTokenError {
  let value = input;
  let signingInput: string | undefined;
  const compact = typeof value === "string" ? COMPACT.exec(value.trim()) : null;
  if (compact !== null) {
    const c = parseCompact(compact);
    if ("status" in c) return c;
    value = c.outer;
    signingInput = c.signingInput;
  }
  if (typeof value === "string") {
    const text = value.trim();
    let json = text;
    if (!text.startsWith("{")) {
      if (!/^[A-Za-z0-9_\-+/=]+$/.test(text)) return malformed("not base64");
      json = Buffer.from(text, "base64").toString("utf8");
    }
    try {
      value = JSON.parse(json);
    } catch {
      return malformed("not JSON");
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return malformed("not a JSON object");
  }
  const outer = value as Record<string, unknown>;
  const t = outer.opToken;
  if (typeof outer.signature !== "string" || outer.signature === "") {
    return malformed('"signature" must be a non-empty string');
  }
  if (typeof t !== "object" || t === null || Array.isArray(t)) {
    return malformed('"opToken" must be an object');
  }
  const o = t as Record<string, unknown>;
  if (typeof o.operation !== "string") {
    return malformed('"opToken.operation" must be a string');
  }
  if (o.modelId !== null && typeof o.modelId !== "string") {
    return malformed('"opToken.modelId" must be a string or null');
  }
  if (typeof o.issuedAt !== "number" || !Number.isFinite(o.issuedAt)) {
    return malformed('"opToken.issuedAt" must be unix seconds');
  }
  if (
    !Array.isArray(o.signers) || !o.signers.every((s) => typeof s === "string")
  ) {
    return malformed('"opToken.signers" must be an array of strings');
  }
  if (
    typeof o.nonce !== "string" || o.nonce === "" ||
    o.nonce.length > NONCE_CHARS_MAX
  ) {
    return malformed(
      `"opToken.nonce" must be a string of 1-${NONCE_CHARS_MAX} characters`,
    );
  }
  return {
    token: {
      operation: o.operation,
      modelId: o.modelId as string | null,
      issuedAt: o.issuedAt,
      signers: o.signers as string[],
      nonce: o.nonce,
    },
    signature: outer.signature,
    raw: o,
    ...(signingInput === undefined ? {} : { signingInput }),
  };
}

function signatureBytes(sig: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(sig)) return Buffer.from(sig, "hex");
  if (/^[A-Za-z0-9_-]{43}=?$/.test(sig)) return Buffer.from(sig, "base64url");
  return null;
}

export type OpCall = {
  operation: LifecycleOperation;
  modelId: string | null;
  /** Every other field of the request body except verifiedOpToken. */
  params: Record<string, unknown>;
};

/** Parameters whose signed value differs from the call's (absent on one side counts). */
function paramDifferences(
  signed: Record<string, unknown>,
  call: Record<string, unknown>,
): string[] {
  const names = new Set([
    ...Object.keys(signed).filter((k) => !OP_TOKEN_FIELDS.includes(k)),
    ...Object.keys(call),
  ]);
  const show = (v: unknown) =>
    v === undefined ? "absent" : canonicalJson(v).slice(0, 200);
  const out: string[] = [];
  for (const k of [...names].sort()) {
    if (show(signed[k]) === show(call[k])) continue;
    out.push(`${k}: signed ${show(signed[k])}, sent ${show(call[k])}`);
  }
  return out;
}

/** Checks a token for one call; returns the token, or the first failed check. */
export function verifyOpToken(
  input: unknown,
  call: OpCall,
  policy: OpTokenPolicy,
  nonces: NonceStore,
  nowSecs: number,
): OpToken | OpTokenError {
  if (input === undefined || input === null || input === "") {
    return apiError("missing_op_token", {
      detail:
        `${call.operation} is a governed operation: send "verifiedOpToken" signed by ${policy.minSigners} of the configured signers`,
    });
  }
  const parsed = parseOpToken(input);
  if ("status" in parsed) return parsed;
  const { token, signature, raw } = parsed;
  const given = signatureBytes(signature);
  // Signed over what the client sent (canonicalized), not our re-typed copy;
  // the compact form over its own `header.payload` text.
  const expected = createHmac("sha256", policy.key).update(
    parsed.signingInput ?? canonicalJson(raw),
  ).digest();
  if (
    given === null || given.length !== expected.length ||
    !timingSafeEqual(given, expected)
  ) {
    return apiError("op_token_bad_signature");
  }
  if (token.operation !== call.operation) {
    return apiError("op_token_wrong_operation", {
      detail:
        `verifiedOpToken is for operation "${token.operation}", this call is "${call.operation}"`,
    });
  }
  if (token.modelId !== call.modelId) {
    return apiError("op_token_wrong_model", {
      detail: `verifiedOpToken is for model ${
        JSON.stringify(token.modelId)
      }, this call is for ${JSON.stringify(call.modelId)}`,
    });
  }
  const differs = paramDifferences(raw, call.params);
  if (differs.length > 0) {
    return apiError("op_token_params_mismatch", {
      detail: `verifiedOpToken does not sign this call's parameters (${
        differs.join("; ")
      }); the token must carry every body field except verifiedOpToken, with the same values`,
    });
  }
  const skew = nowSecs - token.issuedAt;
  if (Math.abs(skew) > OP_TOKEN_WINDOW_SECS) {
    return apiError("op_token_expired", {
      detail: `verifiedOpToken was issued ${Math.round(Math.abs(skew))} s ${
        skew > 0 ? "ago" : "in the future"
      }; it must be within ${OP_TOKEN_WINDOW_SECS} s of the relay's clock`,
    });
  }
  const valid = new Set(
    token.signers.filter((s) => policy.signers.includes(s)),
  );
  if (valid.size < policy.minSigners) {
    return apiError("op_token_insufficient_signers", {
      detail:
        `verifiedOpToken has ${valid.size} distinct configured signer(s), ${policy.minSigners} of [${
          policy.signers.join(", ")
        }] are required (OP_TOKEN_MIN_SIGNERS)`,
    });
  }
  if (
    !nonces.claim(token.nonce, nowSecs, token.issuedAt + OP_TOKEN_WINDOW_SECS)
  ) {
    return apiError("op_token_replayed", {
      detail:
        "verifiedOpToken nonce was already used: every operation needs a fresh token",
    });
  }
  return token;
}

/** Where lifecycle calls get their policy: the key file, signers and nonces (relay.ts builds it). */
export type Governance = {
  /** The policy, or why lifecycle routes are unavailable (503). */
  policy(): OpTokenPolicy | string;
  nonces: NonceStore | null;
  /**
   * A nonce store shared by a cluster (issue 16), asynchronous: claimed, like
   * `nonces`, only once every other check passed. Takes precedence over `nonces`.
   */
  claimNonce?: (
    nonce: string,
    nowSecs: number,
    expiresAtSecs: number,
  ) => Promise<boolean>;
};

/** Lets every nonce through verifyOpToken when the shared store claims it afterwards. */
const CLAIMED_LATER: NonceStore = { claim: () => true };

export type OpTokenCheck =
  | { kind: "verified"; token: OpToken }
  | { kind: "refused"; error: OpTokenError };

/**
 * The one gate of a lifecycle call: governance configured (else 503 naming
 * the missing setting), then the token verified against the whole call, its
 * nonce claimed last (in a cluster, from the store every instance shares).
 */
export async function checkOpToken(
  governance: Governance,
  input: unknown,
  call: OpCall,
  nowSecs: () => number,
): Promise<OpTokenCheck> {
  const policy = governance.policy();
  const shared = governance.claimNonce;
  const nonces = shared === undefined ? governance.nonces : CLAIMED_LATER;
  if (typeof policy === "string" || nonces === null) {
    const message = typeof policy === "string"
      ? policy
      : "the nonce store is unavailable";
    return {
      kind: "refused",
      error: apiError("lifecycle_unconfigured", { detail: message }),
    };
  }
  const verified = verifyOpToken(input, call, policy, nonces, nowSecs());
  if ("status" in verified) return { kind: "refused", error: verified };
  if (
    shared !== undefined &&
    !(await shared(
      verified.nonce,
      nowSecs(),
      verified.issuedAt + OP_TOKEN_WINDOW_SECS,
    ).catch(() => false))
  ) {
    return {
      kind: "refused",
      error: apiError("op_token_replayed", {
        detail:
          "verifiedOpToken nonce was already used (or the shared nonce store is unreachable): every operation needs a fresh token",
      }),
    };
  }
  return { kind: "verified", token: verified };
}

/** Reads the key file: its bytes without trailing CR/LF; an error text when unusable. */
export function readOpTokenKey(path: string): Uint8Array | string {
  if (path === "") {
    return "lifecycle operations are disabled: set VERIFIED_OP_TOKEN_KEY_PATH (--verified-op-token-key-path) to a file holding the shared HMAC key, and OP_TOKEN_SIGNERS / OP_TOKEN_MIN_SIGNERS";
  }
  let bytes: Uint8Array;
  try {
    bytes = Deno.readFileSync(path);
  } catch (e) {
    return `lifecycle operations are unavailable: cannot read the op-token key at VERIFIED_OP_TOKEN_KEY_PATH "${path}": ${
      (e as Error).message
    }`;
  }
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0x0a || bytes[end - 1] === 0x0d)) end--;
  if (end < 16) {
    return `lifecycle operations are unavailable: the op-token key at "${path}" is shorter than 16 bytes`;
  }
  return bytes.slice(0, end);
}
