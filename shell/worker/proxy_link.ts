// The worker's WebSocket to the proxy: one socket at a time, its events turned
// into worker events, frames of one turn sent in one write (frame_batch.ts).
// The `ws` package rather than Deno's WebSocket (issue 10, measured): Deno's
// client socket has no TCP_NODELAY, so a chunk frame sent right after another
// waited for the proxy's delayed ACK, ~40 ms. `ws` sets it.
// @ts-types="npm:@types/ws@8.18.1"
import { WebSocket } from "ws";
import {
  binaryChunkFrameLength,
  encodeFrame,
  type WorkerMessage,
  writeBinaryChunkFrame,
} from "../../core/protocol/mod.ts";
import { FRAME_CHARS_MAX, type WorkerInput } from "../../core/worker/mod.ts";
import { type Corkable, makeFrameBatcher } from "../frame_batch.ts";
import type { Logger } from "../log.ts";

/**
 * Unsent bytes on the proxy socket above which backend reads pause: a backend
 * faster than the link (or a huge answer) must not pile up in the worker.
 */
const SEND_BUFFER_BYTES_MAX = 8 * 1024 * 1024;

export type ProxyLinkDeps = {
  connectUrl: string;
  workerSecret: string;
  dispatch: (event: WorkerInput) => void;
  log: Logger;
  /** In [0, 1); carried by socketClosed for the reconnect jitter. */
  random: () => number;
};

export type ProxyLink = {
  connect(): void;
  /** Sends when the socket is open; dropped otherwise (the core knows it is not). */
  send(message: WorkerMessage): void;
  /** A chunk-bytes-v1 binary frame (same rules as `send`). */
  sendChunkBytes(requestId: string, chunk: Uint8Array): void;
  /** Whether the socket can take more answer bytes now. */
  hasRoom(): boolean;
  close(code: number, reason: string): void;
  /** Cuts the socket; its close event carries on as a normal disconnect. */
  terminate(): void;
  /** Closes with 1000 for an exit; resolves once closed (at once with no socket). */
  closeForExit(): Promise<void>;
};

export function makeProxyLink(deps: ProxyLinkDeps): ProxyLink {
  let socket: WebSocket | null = null;
  /** `socket`'s TCP socket: frames of one turn leave in one write. */
  let rawSocket: Corkable | null = null;
  const batcher = makeFrameBatcher();
  return {
    connect() {
      let wasOpen = false;
      const ws = new WebSocket(deps.connectUrl, {
        headers: { "X-Worker-Secret": deps.workerSecret },
        // A UTF-8 character is at most 4 bytes; decode.ts enforces the limit.
        maxPayload: FRAME_CHARS_MAX * 4,
        perMessageDeflate: false,
      });
      socket = ws;
      rawSocket = null;
      ws.on("upgrade", (res) => {
        if (socket === ws) rawSocket = res.socket;
      });
      ws.onopen = () => {
        wasOpen = true;
        deps.dispatch({ kind: "socketOpened" });
      };
      ws.onmessage = (m) => {
        if (typeof m.data === "string") {
          deps.dispatch({ kind: "frameReceived", text: m.data });
        } else deps.log("warn", "ignored a binary frame from the proxy");
      };
      ws.onerror = () => {}; // A close event always follows and carries the code.
      ws.onclose = (c) => {
        if (socket === ws) {
          socket = null;
          rawSocket = null;
        }
        deps.dispatch({
          kind: "socketClosed",
          code: c.code,
          reason: c.reason,
          wasOpen,
          random01: deps.random(),
        });
      };
    },
    send(message) {
      if (socket?.readyState !== WebSocket.OPEN) return;
      if (rawSocket !== null) batcher.hold(rawSocket);
      socket.send(encodeFrame(message));
    },
    sendChunkBytes(requestId, chunk) {
      if (socket?.readyState !== WebSocket.OPEN) return;
      if (rawSocket !== null) batcher.hold(rawSocket);
      // One allocation for header and payload (ws sends one buffer per frame).
      const frame = Buffer.allocUnsafe(
        binaryChunkFrameLength(requestId, chunk.length),
      );
      writeBinaryChunkFrame(frame, requestId, chunk);
      socket.send(frame, { binary: true });
    },
    hasRoom() {
      return (socket?.bufferedAmount ?? 0) < SEND_BUFFER_BYTES_MAX;
    },
    close(code, reason) {
      if (socket !== null && socket.readyState <= WebSocket.OPEN) {
        socket.close(code, reason);
      }
    },
    terminate() {
      socket?.terminate();
    },
    closeForExit() {
      const ws = socket;
      if (ws === null || ws.readyState === WebSocket.CLOSED) {
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        ws.addEventListener("close", () => resolve(), { once: true });
        if (ws.readyState <= WebSocket.OPEN) {
          ws.close(1000, "worker shutting down");
        }
      });
    },
  };
}
