import assert from "node:assert/strict";
import type { HttpRequest } from "../door/exchange.ts";
import {
  clientAddress,
  DEFAULT_TRUSTED_PROXIES,
  isTrusted,
  parseAddress,
  parseTrustedProxies,
} from "./client_address.ts";

function req(peer: string, forwarded?: string): HttpRequest {
  return {
    socket: { remoteAddress: peer },
    headers: forwarded === undefined ? {} : { "x-forwarded-for": forwarded },
  } as unknown as HttpRequest;
}

const loopback = parseTrustedProxies(DEFAULT_TRUSTED_PROXIES);

Deno.test("C2 behind a local TLS proxy the client is the address the proxy appended, not the proxy", () => {
  // nginx's $proxy_add_x_forwarded_for appends the real peer last; a client can
  // only forge what comes before it.
  assert.equal(
    clientAddress(req("127.0.0.1", "6.6.6.6, 203.0.113.7"), loopback),
    "203.0.113.7",
  );
  assert.equal(
    clientAddress(req("::1", "198.51.100.2"), loopback),
    "198.51.100.2",
  );
  assert.equal(
    clientAddress(req("::ffff:127.0.0.1", "198.51.100.3"), loopback),
    "198.51.100.3",
  );
  assert.equal(clientAddress(req("127.0.0.1"), loopback), "127.0.0.1");
});

Deno.test("issue 15 X-Forwarded-For from a peer outside TRUSTED_PROXIES is ignored", () => {
  assert.equal(
    clientAddress(req("203.0.113.9", "127.0.0.1"), loopback),
    "203.0.113.9",
  );
  // With no trusted proxies at all, even loopback's header is ignored.
  assert.equal(
    clientAddress(req("127.0.0.1", "198.51.100.2"), parseTrustedProxies("")),
    "127.0.0.1",
  );
});

Deno.test("issue 15 a chain of trusted proxies is skipped from the right; a garbage hop stops the walk", () => {
  const t = parseTrustedProxies("10.0.0.0/8, fd00::/8, 127.0.0.1");
  assert.equal(
    clientAddress(
      req("127.0.0.1", "6.6.6.6, 198.51.100.4, 10.1.2.3, fd00::5"),
      t,
    ),
    "198.51.100.4",
  );
  assert.equal(
    clientAddress(req("10.9.9.9", "nonsense, 10.0.0.2"), t),
    "10.0.0.2",
  );
  // Every hop trusted: the leftmost is the best we know.
  assert.equal(
    clientAddress(req("10.9.9.9", "10.0.0.3, 10.0.0.2"), t),
    "10.0.0.3",
  );
});

Deno.test("issue 15 TRUSTED_PROXIES parses IPv4 and IPv6 addresses and CIDR blocks and rejects anything else", () => {
  const t = parseTrustedProxies("192.168.0.0/16,2001:db8::/32,::1,1.2.3.4");
  assert.equal(isTrusted(t, "192.168.44.5"), true);
  assert.equal(isTrusted(t, "192.169.0.1"), false);
  assert.equal(isTrusted(t, "2001:db8:1::7"), true);
  assert.equal(isTrusted(t, "2001:db9::7"), false);
  assert.equal(isTrusted(t, "::1"), true);
  assert.equal(isTrusted(t, "::ffff:1.2.3.4"), true);
  assert.equal(isTrusted(t, "1.2.3.5"), false);
  assert.deepEqual([...parseAddress("::ffff:7f00:1")!], [127, 0, 0, 1]);
  assert.deepEqual(
    [...parseAddress("1::")!],
    [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
  );
  for (
    const bad of [
      "1.2.3",
      "1.2.3.256",
      "10.0.0.0/33",
      "::1/129",
      "x",
      "1::2::3",
      "1:2:3:4:5:6:7:8:9",
      "10.0.0.0/8/8",
      "10.0.0.0/a",
    ]
  ) {
    assert.throws(() => parseTrustedProxies(bad), /not an IPv4 or IPv6/, bad);
  }
});
