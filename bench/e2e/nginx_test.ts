import assert from "node:assert/strict";
import { nginxConfig } from "./nginx.ts";

const CONF = nginxConfig("/tmp/n", [
  { name: "backend", listenPort: 1001, backend: "127.0.0.1:2001" },
  { name: "stamp", listenPort: 1002, backend: "127.0.0.1:2002" },
]);

Deno.test("nginx config: everything nginx writes stays under the prefix", () => {
  assert.match(CONF, /^pid \/tmp\/n\/nginx\.pid;$/m);
  assert.match(CONF, /^error_log \/tmp\/n\/error\.log warn;$/m);
  assert.match(CONF, /^\s+access_log off;$/m);
  assert.match(CONF, /^worker_processes auto;$/m);
  assert.doesNotMatch(CONF, /daemon/); // given on the command line
});

Deno.test("nginx config: one upstream with keepalive and one server per route", () => {
  for (
    const [name, port, backend] of [["backend", 1001, 2001], [
      "stamp",
      1002,
      2002,
    ]]
  ) {
    assert.match(
      CONF,
      new RegExp(
        `upstream ${name} \\{\\n\\s+server 127\\.0\\.0\\.1:${backend};\\n\\s+keepalive 64;`,
      ),
    );
    assert.match(CONF, new RegExp(`listen 127\\.0\\.0\\.1:${port};`));
    assert.match(CONF, new RegExp(`proxy_pass http://${name};`));
  }
});

Deno.test("nginx config: streams pass through unbuffered on reused HTTP/1.1 connections", () => {
  for (
    const d of [
      "proxy_http_version 1.1;",
      'proxy_set_header Connection "";',
      "proxy_buffering off;",
      "proxy_request_buffering off;",
      "proxy_read_timeout 3600s;",
    ]
  ) {
    assert.equal(CONF.split(d).length - 1, 2, d);
  }
});

Deno.test("nginx config: a backend's idle close never becomes a 502 (llama-server closes idle connections after 5 s)", () => {
  for (
    const d of [
      "keepalive_timeout 4s;",
      "proxy_next_upstream error timeout non_idempotent;",
    ]
  ) {
    assert.equal(CONF.split(d).length - 1, 2, d);
  }
});

Deno.test("nginx config: braces balance", () => {
  assert.equal(CONF.split("{").length, CONF.split("}").length);
});
