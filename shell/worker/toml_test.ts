import assert from "node:assert/strict";
import { parseToml, TomlError } from "./toml.ts";

Deno.test("toml reads the file the original's setup wizard writes", () => {
  const text = [
    "# written by the setup wizard",
    'proxy_url = "https://relay.example.com"',
    "worker_secret = 'lit\\eral'",
    'worker_name = "gpu \\"one\\" \\u00e9"   # trailing comment',
    "",
    "max_concurrency = 1_0",
    "enabled = true",
    'models = ["*"]',
    "prefixes = [",
    '  "/v1/a", # first',
    "  '/v1/b',",
    "]",
  ].join("\r\n");
  assert.deepEqual(parseToml(text), {
    proxy_url: "https://relay.example.com",
    worker_secret: "lit\\eral",
    worker_name: 'gpu "one" é',
    max_concurrency: 10,
    enabled: true,
    models: ["*"],
    prefixes: ["/v1/a", "/v1/b"],
  });
});

Deno.test("toml refuses what it does not read, naming the line", () => {
  const cases: [string, RegExp][] = [
    ['a = "x"\n[worker]\nb = 1', /line 2: tables/],
    ['a = "unclosed\nb = 1', /line 1: the string is not closed/],
    ["a = 1\na = 2", /line 2: the key "a" is set twice/],
    ["a = nope", /line 1: expected a value/],
    ['a = "x" b', /line 1: unexpected text/],
    ["a = [1, 2", /not closed|expected , or \]/],
    ["a.b = 1", /dotted keys/],
    ["a = 1979-05-27", /expected a value/],
    ['a = "\\q"', /unknown escape/],
  ];
  for (const [text, why] of cases) {
    assert.throws(
      () => parseToml(text),
      (e) => e instanceof TomlError && why.test(e.message),
      text,
    );
  }
});
