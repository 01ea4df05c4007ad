// The opening handshake's pure parts: keys, the request check, the answer check.
import assert from "node:assert/strict";
import {
  acceptKey,
  clientRequest,
  newClientKey,
  parseResponseHead,
  responseProblem,
  switchingProtocols,
  upgradeProblem,
} from "./handshake.ts";
import { headEnd } from "../http1/syntax.ts";

const RFC_KEY = "dGhlIHNhbXBsZSBub25jZQ==";

Deno.test("the accept key is RFC 6455's worked example", () => {
  assert.equal(acceptKey(RFC_KEY), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  assert.match(switchingProtocols(RFC_KEY), /^HTTP\/1\.1 101 Switching/);
  assert.match(
    switchingProtocols(RFC_KEY),
    /\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=\r\n\r\n$/,
  );
});

Deno.test("a client key is 16 random bytes, and the request carries it with our headers", () => {
  const key = newClientKey();
  assert.match(key, /^[+/0-9A-Za-z]{22}==$/);
  assert.notEqual(key, newClientKey());
  const req = clientRequest(
    new URL("ws://h:81/v1/worker/connect?provider=p"),
    key,
    { "X-Worker-Secret": "s" },
  );
  assert.match(req, /^GET \/v1\/worker\/connect\?provider=p HTTP\/1\.1\r\n/);
  assert.match(req, /\r\nHost: h:81\r\n/);
  assert.match(
    req,
    new RegExp(`\r\nSec-WebSocket-Key: ${key.replace(/[+/]/g, "\\$&")}\r\n`),
  );
  assert.match(req, /\r\nX-Worker-Secret: s\r\n\r\n$/);
  assert.throws(() => clientRequest(new URL("ws://h/"), key, { a: "b\r\nc" }));
});

Deno.test("the server's answer opens only with 101, the upgrade headers and the right accept, and no extension", () => {
  const ok =
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${
      acceptKey(RFC_KEY)
    }\r\n\r\n`;
  const problem = (text: string) =>
    responseProblem(parseResponseHead(text)!, RFC_KEY);
  assert.equal(problem(ok), null);
  assert.match(problem(ok.replace("101 Switching", "401 No"))!, /401/);
  assert.match(
    problem(ok.replace(/Accept: .*\r\n/, "Accept: x\r\n"))!,
    /Accept/,
  );
  assert.match(
    problem(
      ok.replace(
        "\r\n\r\n",
        "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
      ),
    )!,
    /extension/,
  );
  assert.equal(parseResponseHead("garbage"), null);
  const bytes = new TextEncoder().encode(ok + "tail");
  assert.equal(headEnd(bytes, 0, bytes.length), ok.length);
});

Deno.test("an upgrade request needs GET, Upgrade, Connection, version 13 and a 16-byte key", () => {
  const base: Record<string, string> = {
    upgrade: "WebSocket",
    connection: "keep-alive, Upgrade",
    "sec-websocket-version": "13",
    "sec-websocket-key": RFC_KEY,
  };
  const check = (headers: Record<string, string>, method = "GET") =>
    upgradeProblem({ method, headers });
  assert.equal(check(base), null);
  assert.match(check(base, "POST")!, /GET/);
  assert.match(check({ ...base, upgrade: "h2c" })!, /Upgrade/);
  assert.match(check({ ...base, connection: "close" })!, /Connection/);
  assert.match(check({ ...base, "sec-websocket-version": "8" })!, /Version/);
  assert.match(check({ ...base, "sec-websocket-key": "short" })!, /Key/);
});
