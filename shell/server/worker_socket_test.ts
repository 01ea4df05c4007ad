import assert from "node:assert/strict";
import type { IncomingMessage } from "node:http";
import { clientAddress } from "./worker_socket.ts";

function req(peer: string, forwarded?: string): IncomingMessage {
  return {
    socket: { remoteAddress: peer },
    headers: forwarded === undefined ? {} : { "x-forwarded-for": forwarded },
  } as unknown as IncomingMessage;
}

Deno.test("C2 failed logins behind a local TLS proxy count per real client, not per proxy", () => {
  // nginx's $proxy_add_x_forwarded_for appends the real peer last; a client can
  // only forge what comes before it.
  assert.equal(
    clientAddress(req("127.0.0.1", "6.6.6.6, 203.0.113.7")),
    "203.0.113.7",
  );
  assert.equal(clientAddress(req("::1", "198.51.100.2")), "198.51.100.2");
  // A remote peer's own header is never trusted.
  assert.equal(clientAddress(req("203.0.113.9", "127.0.0.1")), "203.0.113.9");
  assert.equal(clientAddress(req("127.0.0.1")), "127.0.0.1");
});
