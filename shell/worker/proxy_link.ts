// The worker's WebSocket to the proxy: one socket at a time, its events turned
// into worker events. Our own client (shell/ws/, issue 31): TCP_NODELAY on (a
// chunk frame sent right after another must not wait for the proxy's delayed
// ACK, ~40 ms, which is why Deno's WebSocket does not do), frames of one turn
// in one write, and about half the CPU per message of the `ws` package it
// replaces (bench/README.md).
import {
  binaryChunkFrameLength,
  encodeFrame,
  type WorkerMessage,
  writeBinaryChunkFrame,
} from "../../core/protocol/mod.ts";
import { FRAME_CHARS_MAX, type WorkerInput } from "../../core/worker/mod.ts";
import type { Logger } from "../log.ts";
import { connectWebSocket } from "../ws/client.ts";
import type { WsConnection } from "../ws/connection.ts";

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
  let socket: WsConnection | null = null;
  return {
    connect() {
      let wasOpen = false;
      const ws = connectWebSocket(deps.connectUrl, {
        headers: { "X-Worker-Secret": deps.workerSecret },
        // A UTF-8 character is at most 4 bytes; decode.ts enforces the limit.
        maxPayload: FRAME_CHARS_MAX * 4,
      }, {
        onOpen: () => {
          wasOpen = true;
          deps.dispatch({ kind: "socketOpened" });
        },
        onText: (text) => deps.dispatch({ kind: "frameReceived", text }),
        onBinary: () =>
          deps.log("warn", "ignored a binary frame from the proxy"),
        onClose: (code, reason) => {
          if (socket === ws) socket = null;
          deps.dispatch({
            kind: "socketClosed",
            code,
            reason,
            wasOpen,
            random01: deps.random(),
          });
        },
      });
      socket = ws;
    },
    send(message) {
      if (socket?.state !== "open") return;
      socket.sendText(encodeFrame(message));
    },
    sendChunkBytes(requestId, chunk) {
      if (socket?.state !== "open") return;
      // Header and payload written straight into the socket's buffer.
      socket.sendBinaryWith(
        binaryChunkFrameLength(requestId, chunk.length),
        (into) => writeBinaryChunkFrame(into, requestId, chunk),
      );
    },
    hasRoom() {
      return (socket?.bufferedAmount ?? 0) < SEND_BUFFER_BYTES_MAX;
    },
    close(code, reason) {
      const state = socket?.state;
      if (state === "connecting" || state === "open") {
        socket!.close(code, reason);
      }
    },
    terminate() {
      socket?.terminate();
    },
    closeForExit() {
      const ws = socket;
      if (ws === null || ws.state === "closed") return Promise.resolve();
      return new Promise<void>((resolve) => {
        ws.once("close", resolve);
        if (ws.state === "connecting" || ws.state === "open") {
          ws.close(1000, "worker shutting down");
        }
      });
    },
  };
}
