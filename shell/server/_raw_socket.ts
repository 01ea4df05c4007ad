// Test-only: raw TCP clients for what well-behaved libraries never do (a body
// that stops halfway, a WebSocket peer that ignores close frames, a frame that
// never ends). Real sockets, byte by byte.

import { connTransport } from "../ws/transport.ts";

export type RawConn = {
  conn: Deno.TcpConn;
  /** Everything received so far, decoded as latin1 (bytes preserved). */
  received(): string;
  write(data: string | Uint8Array): Promise<void>;
  /** Resolves with elapsed ms when the server ends or resets the connection. */
  ended: Promise<number>;
  close(): void;
};

/**
 * Reads `conn` until the server ends or resets it (or we close it), handing
 * each read to `onBytes` (a view of a reused buffer of `bufBytes`).
 */
export async function readUntilEnd(
  conn: Deno.Conn,
  onBytes: (bytes: Uint8Array) => void,
  bufBytes = 64 * 1024,
): Promise<void> {
  const buf = new Uint8Array(bufBytes);
  try {
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) return;
      onBytes(buf.subarray(0, n));
    }
  } catch {
    // reset by the server or closed by us: ended either way
  }
}

export async function rawConnect(port: number): Promise<RawConn> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const started = performance.now();
  const chunks: Uint8Array[] = [];
  const ended = (async () => {
    await readUntilEnd(conn, (bytes) => chunks.push(bytes.slice()));
    return performance.now() - started;
  })();
  const transport = connTransport(conn);
  return {
    conn,
    received: () => {
      let s = "";
      for (const c of chunks) for (const b of c) s += String.fromCharCode(b);
      return s;
    },
    write: (data) =>
      transport.write(
        typeof data === "string" ? new TextEncoder().encode(data) : data,
      ),
    ended,
    close: () => transport.close(),
  };
}

/** Sends a WebSocket upgrade request for the worker endpoint. */
export function upgradeRequest(
  headers: Record<string, string> = {},
  path = "/v1/worker/connect?provider=local",
): string {
  const lines = [
    `GET ${path} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version: 13",
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  return lines.join("\r\n") + "\r\n\r\n";
}

/** A masked client frame header (and payload, when given) for `opcode`. */
export function clientFrame(
  opcode: number,
  payload: Uint8Array,
  declaredLength = payload.length,
): Uint8Array {
  const head: number[] = [0x80 | opcode];
  if (declaredLength < 126) head.push(0x80 | declaredLength);
  else if (declaredLength < 65536) {
    head.push(0x80 | 126, declaredLength >> 8, declaredLength & 0xff);
  } else {
    head.push(0x80 | 127, 0, 0, 0, 0);
    for (let shift = 24; shift >= 0; shift -= 8) {
      head.push((declaredLength >>> shift) & 0xff);
    }
  }
  const mask = [1, 2, 3, 4];
  head.push(...mask);
  const out = new Uint8Array(head.length + payload.length);
  out.set(head);
  for (let i = 0; i < payload.length; i++) {
    out[head.length + i] = payload[i]! ^ mask[i % 4]!;
  }
  return out;
}

/** The close code in the first server close frame in `received`, or null. */
export function closeCodeIn(received: string): number | null {
  const at = received.indexOf("\r\n\r\n");
  let i = at < 0 ? 0 : at + 4;
  while (i + 2 <= received.length) {
    const op = received.charCodeAt(i) & 0x0f;
    let len = received.charCodeAt(i + 1) & 0x7f;
    let p = i + 2;
    if (len === 126) {
      len = (received.charCodeAt(p) << 8) | received.charCodeAt(p + 1);
      p += 2;
    } else if (len === 127) return null;
    if (op === 8) {
      return len >= 2
        ? (received.charCodeAt(p) << 8) | received.charCodeAt(p + 1)
        : null;
    }
    i = p + len;
  }
  return null;
}

/** Waits until `cond` holds on what arrived, or the connection ended. */
export async function until(
  c: RawConn,
  cond: (received: string) => boolean,
  timeoutMs = 5000,
): Promise<string> {
  const deadline = performance.now() + timeoutMs;
  let done = false;
  c.ended.then(() => done = true);
  while (!cond(c.received()) && !done) {
    if (performance.now() > deadline) {
      throw new Error(`timed out; got ${JSON.stringify(c.received())}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  return c.received();
}
