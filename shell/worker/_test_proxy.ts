// Test-only stand-in for the proxy's worker endpoint: Deno.serve + upgradeWebSocket
// on loopback. It records every frame, acks registration, and can play an
// original-style server that accepts only protocol_version "2026-04-bridge-v1" or none.
import { decodeBinaryWorkerFrame } from "../../core/protocol/mod.ts";
import { waitFor } from "../procs.ts";

// deno-lint-ignore no-explicit-any
export type Frame = Record<string, any>;

export type TestProxyOptions = {
  port?: number;
  secret?: string;
  /** Which protocol_version values are accepted (undefined = absent). */
  acceptVersion?: (version: unknown) => boolean;
  /** Extensions listed in register_ack (to a worker that listed them); none = original server. */
  ackExtensions?: string[];
};

export type TestProxy = {
  port: number;
  url: string;
  frames: Frame[];
  closes: { code: number; reason: string }[];
  connections: number;
  secretsSeen: (string | null)[];
  isOpen(): boolean;
  send(frame: Frame): void;
  /** Waits for a frame matching `match` and returns the first such frame. */
  waitFrame(
    label: string,
    match: (f: Frame) => boolean,
    timeoutMs?: number,
  ): Promise<Frame>;
  close(): Promise<void>;
};

export function startTestProxy(
  opts: TestProxyOptions = {},
): Promise<TestProxy> {
  const secret = opts.secret ?? "test-secret";
  const accept = opts.acceptVersion ?? (() => true);
  let socket: WebSocket | null = null;
  const sockets = new Set<WebSocket>();
  const proxy: Omit<TestProxy, "port" | "url" | "close"> = {
    frames: [],
    closes: [],
    connections: 0,
    secretsSeen: [],
    isOpen: () => socket !== null && socket.readyState === WebSocket.OPEN,
    send(frame) {
      socket?.send(JSON.stringify(frame));
    },
    async waitFrame(label, match, timeoutMs = 5_000) {
      await waitFor(label, () => proxy.frames.some(match), timeoutMs);
      return proxy.frames.find(match)!;
    },
  };
  return new Promise((resolve) => {
    const server = Deno.serve({
      port: opts.port ?? 0,
      hostname: "127.0.0.1",
      onListen(addr) {
        // The same object, so counters read later are live.
        resolve(Object.assign(proxy, {
          port: addr.port,
          url: `http://127.0.0.1:${addr.port}`,
          async close() {
            const closing = [...sockets].map((s) =>
              new Promise<void>((r) => {
                if (s.readyState === WebSocket.CLOSED) return r();
                s.addEventListener("close", () => r(), { once: true });
                s.close(1001, "test proxy going away");
              })
            );
            await Promise.all(closing);
            await server.shutdown();
          },
        }));
      },
    }, (req) => {
      const given = req.headers.get("x-worker-secret");
      const { socket: ws, response } = Deno.upgradeWebSocket(req);
      proxy.connections++;
      proxy.secretsSeen.push(given);
      sockets.add(ws);
      ws.onopen = () => {
        if (given !== secret) ws.close(1008, "invalid worker secret");
        else socket = ws;
      };
      ws.binaryType = "arraybuffer";
      ws.onmessage = (m) => {
        if (m.data instanceof ArrayBuffer) {
          // chunk-bytes-v1: recorded as {type: "binary_chunk", request_id, bytes}.
          const d = decodeBinaryWorkerFrame(new Uint8Array(m.data), Infinity);
          proxy.frames.push(
            d.ok
              ? {
                type: "binary_chunk",
                request_id: d.message.requestId,
                bytes: d.message.chunk,
              }
              : { type: "bad_binary", error: d.error.message },
          );
          return;
        }
        const frame = JSON.parse(String(m.data)) as Frame;
        proxy.frames.push(frame);
        if (frame.type !== "register") return;
        if (!accept(frame.protocol_version)) {
          ws.close(1002, "unsupported protocol_version");
          return;
        }
        ws.send(JSON.stringify({
          type: "register_ack",
          worker_id: `w-${proxy.connections}`,
          models: frame.models,
          warnings: ["test warning"],
          protocol_version: frame.protocol_version,
          ...(opts.ackExtensions === undefined ? {} : {
            extensions: opts.ackExtensions.filter((x) =>
              (frame.extensions ?? []).includes(x)
            ),
          }),
        }));
      };
      ws.onclose = (c) => {
        proxy.closes.push({ code: c.code, reason: c.reason });
        sockets.delete(ws);
        if (socket === ws) socket = null;
      };
      return response;
    });
  });
}
