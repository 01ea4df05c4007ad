// Issue 25's settings and route rules: MODEL_ALIASES, FORWARD_PATH_PREFIXES
// (server), ENDPOINT_PREFIXES (worker), and which paths go to a worker.
import assert from "node:assert/strict";
import { OptionError } from "../../options.ts";
import { parseForwardPrefixes, parseModelAliases } from "../config.ts";
import { parseWorkerConfig } from "../../worker/config.ts";
import { forwardedPathRefusal, isForwarded } from "./client_http.ts";

Deno.test("MODEL_ALIASES: alias=model pairs; malformed, self or repeated aliases are refused", () => {
  assert.deepEqual(
    parseModelAliases(
      " gpt-4o-mini=llama3.1:8b , text-embedding-3-small=nomic-embed-text,",
    ),
    {
      "gpt-4o-mini": "llama3.1:8b",
      "text-embedding-3-small": "nomic-embed-text",
    },
  );
  assert.deepEqual(parseModelAliases(""), {});
  for (const bad of ["a", "=b", "a=", "a=a", "a=b,a=c"]) {
    assert.throws(() => parseModelAliases(bad), OptionError, bad);
  }
});

Deno.test("FORWARD_PATH_PREFIXES: absolute prefixes only, never / itself", () => {
  assert.deepEqual(parseForwardPrefixes("/tokenize, /detokenize,"), [
    "/tokenize",
    "/detokenize",
  ]);
  for (const bad of ["/", "tokenize", "/a b", "/x?y"]) {
    assert.throws(() => parseForwardPrefixes(bad), OptionError, bad);
  }
});

Deno.test("ENDPOINT_PREFIXES and --endpoint-prefixes set the worker's paths; unset is every path", () => {
  const parse = (env: Record<string, string>, args: string[] = []) =>
    parseWorkerConfig(args, (n) => env[n], () => "h")!;
  assert.deepEqual(parse({ WORKER_SECRET: "s" }).endpointPrefixes, []);
  assert.deepEqual(
    parse({
      WORKER_SECRET: "s",
      ENDPOINT_PREFIXES: "/v1/embeddings, /v1/rerank",
    }).endpointPrefixes,
    ["/v1/embeddings", "/v1/rerank"],
  );
  assert.deepEqual(
    parse({ WORKER_SECRET: "s" }, ["--endpoint-prefixes", "/v1/audio/"])
      .endpointPrefixes,
    ["/v1/audio/"],
  );
});

Deno.test("every /v1 path and the listed prefixes are forwarded; relay routes never are", () => {
  for (const p of ["/v1/embeddings", "/v1/audio/speech", "/v1/v1/x"]) {
    assert.equal(isForwarded(p, []), true, p);
  }
  assert.equal(isForwarded("/tokenize", []), false);
  assert.equal(isForwarded("/tokenize", ["/tokenize"]), true);
  for (
    const p of [
      "/health",
      "/metrics",
      "/admin/keys",
      "/dashboard",
      "/setup/status",
      "/v1/models",
      "/v1/worker/connect",
      "/v1/capabilities",
      "/v1/models/load",
      "/v1/models/load/task-1",
      "/v1/cache/flush",
    ]
  ) {
    assert.equal(
      isForwarded(p, ["/health", "/admin", "/setup", "/me"]),
      false,
      p,
    );
  }
});

Deno.test("issue 33 an operator's forward prefix matches whole segments only", () => {
  assert.equal(isForwarded("/tokenize/sub", ["/tokenize"]), true);
  assert.equal(isForwarded("/tokenizeX", ["/tokenize"]), false);
  assert.equal(isForwarded("/tokenize-all", ["/tokenize"]), false);
  assert.equal(isForwarded("/api/x", ["/api/"]), true);
  assert.equal(isForwarded("/apix", ["/api/"]), false);
});

Deno.test("issue 33 forwarded paths with encoded separators, backslashes or dot segments are refused; plain ones pass", () => {
  for (
    const t of [
      "/v1/..%2fslots",
      "/v1/..%2Fslots",
      "/tokenize%2f..%2fslots",
      "/v1/a%5c..%5cslots",
      "/v1/a\\b",
      "/v1/./embeddings",
      "/v1/x/../embeddings",
      "/v1/%2e%2e/slots",
      "/v1/.%2E/slots",
      "/v1/%2e/x?q=1",
    ]
  ) assert.notEqual(forwardedPathRefusal(t), null, t);
  for (
    const t of [
      "/v1/embeddings",
      "/v1/files/file-1.jsonl",
      "/v1/a..b/c",
      "/v1/x?path=..%2f..%2fetc",
      "/tokenize",
    ]
  ) assert.equal(forwardedPathRefusal(t), null, t);
});
