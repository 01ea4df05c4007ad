// The worker endpoint (C1, C2, C33, C41): GET /v1/worker/connect?provider=NAME
// upgraded to a WebSocket. Socket callbacks only translate into core events.
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
// @ts-types="npm:@types/ws@8.18.1"
import { type WebSocket, WebSocketServer } from "ws";
import {
  binaryFrameEvent,
  type Event,
  eventFromFrame,
} from "../../core/mod.ts";
import type { Corkable } from "../frame_batch.ts";
import { newWorkerId } from "./ids.ts";
import { secretsEqual } from "./secret.ts";

export type WorkerSocketDeps = {
  sockets: Map<string, WebSocket>;
  /** Each worker's TCP socket, for write batching (frame_batch.ts). */
  rawSockets?: WeakMap<WebSocket, Corkable>;
  submit: (event: Event) => void;
  now: () => number;
  workerSecret: string;
  defaultProvider: string;
  frameCharsMax: number;
};

const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

/**
 * The address failed worker logins are counted against (C2). Behind a TLS proxy
 * on the same host (the README's nginx and Caddy setups) every worker arrives
 * from loopback, and counting them together would let anyone lock out every
 * worker; so from a loopback peer the last X-Forwarded-For entry (the one our
 * own proxy appended, which a client cannot forge) is the client.
 */
export function clientAddress(req: IncomingMessage): string {
  const peer = req.socket.remoteAddress ?? "unknown";
  const forwarded = req.headers["x-forwarded-for"];
  if (!LOOPBACK.has(peer) || forwarded === undefined) return peer;
  const list = (Array.isArray(forwarded) ? forwarded.join(",") : forwarded)
    .split(",");
  const last = list[list.length - 1]?.trim() ?? "";
  return last === "" ? peer : last;
}

export function makeWorkerUpgrade(
  d: WorkerSocketDeps,
): {
  onUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  close: () => void;
} {
  // maxPayload in bytes: a UTF-8 character is at most 4 bytes.
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: d.frameCharsMax * 4,
  });
  function onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? "/", "http://relay.invalid");
    if (url.pathname !== "/v1/worker/connect") {
      socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
      return;
    }
    const header = req.headers["x-worker-secret"];
    const secret = (Array.isArray(header) ? header[0] : header) ??
      url.searchParams.get("secret") ??
      "";
    const provider = url.searchParams.get("provider") ?? d.defaultProvider;
    const clientIp = clientAddress(req);
    wss.handleUpgrade(req, socket, head, (ws) => {
      const workerId = newWorkerId();
      d.sockets.set(workerId, ws);
      d.rawSockets?.set(ws, socket);
      ws.on("message", (data, isBinary) => {
        d.submit(
          isBinary ? binaryFrameEvent(workerId, d.now()) : eventFromFrame(
            workerId,
            d.now(),
            data.toString(),
            d.frameCharsMax,
          ),
        );
      });
      ws.on("close", (code, reason) => {
        d.sockets.delete(workerId);
        const text = reason.toString();
        d.submit({
          kind: "workerDisconnected",
          atMs: d.now(),
          workerId,
          reason: text === "" ? `close code ${code}` : `${code} ${text}`,
        });
      });
      ws.on("error", () => {
        // Followed by "close", which carries the disconnect into the core.
      });
      d.submit({
        kind: "workerConnectAttempted",
        atMs: d.now(),
        workerId,
        provider,
        clientIp,
        secretValid: secretsEqual(secret, d.workerSecret),
      });
    });
  }
  return { onUpgrade, close: () => wss.close() };
}
