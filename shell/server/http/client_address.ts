// Who is on the other end (issue 15): TRUSTED_PROXIES names the peers whose
// X-Forwarded-For is believed. Anyone else could write any address there, so a
// stranger could get a worker's address throttled, or dodge the throttle.
import type { HttpRequest } from "../door/exchange.ts";

/** One address block: 4 bytes (IPv4) or 16 (IPv6), and its prefix length. */
type Block = { bytes: Uint8Array; prefix: number };

export type TrustedProxies = { blocks: Block[]; source: string };

/** Loopback: the README's nginx and Caddy setups run on the relay's host. */
export const DEFAULT_TRUSTED_PROXIES = "127.0.0.0/8,::1";

function parseV4(s: string): Uint8Array | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (m === null) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const n = Number(m[i + 1]);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

function parseV6(s: string): Uint8Array | null {
  if (!/^[0-9a-fA-F:.]+$/.test(s) || s.split("::").length > 2) return null;
  // An embedded IPv4 tail (::ffff:1.2.3.4) is two groups.
  let text = s;
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = parseV4(tail);
    if (v4 === null) return null;
    text = text.slice(0, lastColon + 1) +
      ((v4[0]! << 8) | v4[1]!).toString(16) + ":" +
      ((v4[2]! << 8) | v4[3]!).toString(16);
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const groups = (x: string) => x === "" ? [] : x.split(":");
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const missing = 8 - left.length - right.length;
  if (rest === undefined ? missing !== 0 : missing < 1) return null;
  const all = [
    ...left,
    ...Array(rest === undefined ? 0 : missing).fill("0"),
    ...right,
  ];
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    const g = all[i]!;
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
    const n = parseInt(g, 16);
    out[i * 2] = n >> 8;
    out[i * 2 + 1] = n & 0xff;
  }
  return out;
}

/**
 * An address as bytes; an IPv4-mapped IPv6 address (how a dual-stack socket
 * reports an IPv4 peer) becomes its IPv4 form, so one rule covers both.
 */
export function parseAddress(raw: string): Uint8Array | null {
  const s = raw.trim().replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  const v4 = parseV4(s);
  if (v4 !== null) return v4;
  const v6 = parseV6(s);
  if (v6 === null) return null;
  const mapped = v6.slice(0, 10).every((b) => b === 0) && v6[10] === 0xff &&
    v6[11] === 0xff;
  return mapped ? v6.slice(12) : v6;
}

/** Parses a comma-separated list of addresses and CIDR blocks; throws on a bad entry. */
export function parseTrustedProxies(source: string): TrustedProxies {
  const blocks: Block[] = [];
  for (const entry of source.split(",").map((x) => x.trim())) {
    if (entry === "") continue;
    const [addr, len, extra] = entry.split("/");
    const bytes = parseAddress(addr!);
    const max = bytes === null ? 0 : bytes.length * 8;
    const prefix = len === undefined ? max : Number(len);
    if (
      bytes === null || extra !== undefined ||
      (len !== undefined && !/^\d{1,3}$/.test(len)) || prefix > max
    ) {
      throw new Error(
        `"${entry}" is not an IPv4 or IPv6 address or CIDR block (e.g. 10.0.0.0/8, fd00::/8)`,
      );
    }
    blocks.push({ bytes, prefix });
  }
  return { blocks, source };
}

function inBlock(addr: Uint8Array, b: Block): boolean {
  if (addr.length !== b.bytes.length) return false;
  let bits = b.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((addr[i]! & mask) !== (b.bytes[i]! & mask)) return false;
  }
  return true;
}

export function isTrusted(t: TrustedProxies, raw: string): boolean {
  const addr = parseAddress(raw);
  return addr !== null && t.blocks.some((b) => inBlock(addr, b));
}

/**
 * The client's address: the peer, unless the peer is a trusted proxy; then
 * X-Forwarded-For is read from the right (each proxy appends the address it
 * saw), skipping trusted proxies, and the first other address is the client.
 * Entries left of it were written by the client and are never believed.
 */
export function clientAddress(
  req: HttpRequest,
  trusted: TrustedProxies,
): string {
  const peer = req.socket.remoteAddress ?? "unknown";
  const header = req.headers["x-forwarded-for"];
  if (header === undefined || !isTrusted(trusted, peer)) return peer;
  const hops = (Array.isArray(header) ? header.join(",") : header).split(",")
    .map((x) => x.trim());
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    // A hop that is not an address is not something a proxy of ours wrote.
    if (parseAddress(hop) === null) return client;
    client = hop;
    if (!isTrusted(trusted, hop)) return hop;
  }
  return client;
}
