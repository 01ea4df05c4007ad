// Test-only: the relay with its operations hooks (admin, keys, metrics, pages) on
// an ephemeral loopback port, shaped like TestServer so the scripted worker
// helpers work with it.
import { makeLogger } from "../log.ts";
import { withClosing } from "../with_closing.ts";
import {
  SECRET,
  type TestServer,
  type TestWorker,
  withAddresses,
} from "./_test_helpers.ts";
import type { ServerConfig } from "./config.ts";
import { type Relay, startRelay } from "./relay.ts";

export const ADMIN_TOKEN = "test-admin-token";

export type TestRelay = Relay & TestServer;

export async function startTestRelay(config: ServerConfig): Promise<TestRelay> {
  return withAddresses(
    await startRelay(config, makeLogger(config.logLevel, "text", "test")),
  );
}

/** A test relay with `config`, closed after `fn` whatever it throws. */
export function withTestRelay(
  config: ServerConfig,
  fn: (relay: TestRelay) => Promise<void>,
): Promise<void> {
  return withClosing(startTestRelay(config), fn);
}

export function admin(
  relay: TestServer,
  path: string,
  init: RequestInit = {},
  token = ADMIN_TOKEN,
): Promise<Response> {
  return fetch(`${relay.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${token}`, ...init.headers },
  });
}

/** POST /admin/keys with `fields` as its JSON body; the relay's answer, unread. */
export function postKey(
  relay: TestServer,
  fields: Record<string, unknown>,
): Promise<Response> {
  return admin(relay, "/admin/keys", {
    method: "POST",
    body: JSON.stringify(fields),
  });
}

/** Answers every request frame: streams two chunks when asked to stream, else a JSON body. */
export function autoRespond(w: TestWorker): () => void {
  let stopped = false;
  const seen = new Set<unknown>();
  const onMessage = (e: MessageEvent) => {
    if (stopped) return;
    const f = JSON.parse(e.data as string);
    if (f.type !== "request" || seen.has(f.request_id)) return;
    seen.add(f.request_id);
    if (f.is_streaming) {
      for (const text of ["hel", "lo"]) {
        w.send({
          type: "response_chunk",
          request_id: f.request_id,
          chunk: `data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`,
        });
      }
      w.send({
        type: "response_complete",
        request_id: f.request_id,
        status_code: 200,
      });
    } else {
      w.send({
        type: "response_complete",
        request_id: f.request_id,
        status_code: 200,
        headers: { "content-type": "application/json" },
        body: '{"id":"r","choices":[{"message":{"content":"hello"}}]}',
      });
    }
  };
  w.ws.addEventListener("message", onMessage);
  return () => {
    stopped = true;
    w.ws.removeEventListener("message", onMessage);
  };
}

export { SECRET };
