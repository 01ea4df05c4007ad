// The worker endpoint (C1, C2, C33, C41): GET /v1/worker/connect?provider=NAME
// upgraded to a WebSocket. The secret is compared (constant time) and the core
// admits or refuses in node:http's `upgrade` handler, before the handshake
// completes (issue 15): a refused socket never reaches the frame parser, and an
// admitted one may send only a register-sized amount before its register is
// accepted. Socket callbacks only translate into core events.
import type { IncomingMessage } from "node:http";
import type { HttpRequest } from "../door/exchange.ts";
import type { Duplex } from "node:stream";
// @ts-types="npm:@types/ws@8.18.1"
import { type WebSocket, WebSocketServer } from "ws";
import {
  type Event,
  eventFromBinaryFrame,
  eventFromFrame,
} from "../../../core/mod.ts";
import type { Corkable } from "../../frame_batch.ts";
import { clientAddress, type TrustedProxies } from "../http/client_address.ts";
import type { ConnectionCap } from "../http/connection_cap.ts";
import { requestUrl } from "../http/http_reply.ts";
import { newWorkerId } from "../ids.ts";
import { closeReason } from "../run_effects.ts";
import { secretsEqual } from "../secret.ts";
import { cutAfterLinger } from "../linger.ts";

/**
 * Bytes a worker may send before its register is accepted: the largest register
 * the core takes without trimming (256 models of 256 characters) plus room for
 * the rest of the frame. Anything beyond is not a worker we want to buffer for.
 */
export const PRE_REGISTER_BYTES_MAX = 128 * 1024;
/** A refused socket that does not answer our close frame is cut after this (shorter than LINGER_MS: nothing of theirs is worth waiting for). */
const REFUSED_LINGER_MS = 1000;

export type WorkerSocketDeps = {
  sockets: Map<string, WebSocket>;
  /** Each worker's TCP socket, for write batching (frame_batch.ts). */
  rawSockets?: WeakMap<WebSocket, Corkable>;
  submit: (event: Event) => void;
  now: () => number;
  workerSecret: string;
  /**
   * Whether a client API key presented as the secret admits a worker (the
   * original's key-as-worker-credential, issue 32); absent = never. Set only
   * when the operator turned API_KEYS_AS_WORKER_SECRET on.
   */
  workerKeyValid?: (key: string) => boolean;
  defaultProvider: string;
  frameCharsMax: number;
  trustedProxies: TrustedProxies;
  /** True once the core accepted this worker's register. */
  isRegistered: (workerId: string) => boolean;
  cap?: ConnectionCap;
  /**
   * How long an upgrade may wait for the core's answer before it is refused
   * here (1013). Alone the core answers at once; in a cluster it answers after
   * a log hop, and an attempt whose answer was lost with the log must not hold
   * a worker (and a descriptor) forever (issue 23). Default 10 s.
   */
  answerTimeoutMs?: number;
};

/** Close code and reason for an attempt the relay could not answer: retry soon. */
export const TRY_AGAIN_CODE = 1013;

/** The core's answer to a connect attempt, carried out by the effect runner. */
export type WorkerAdmission = {
  /** Completes the handshake of an admitted attempt; false if not pending here. */
  accept(workerId: string): boolean;
  /** Refuses a pending attempt (close code and reason); false if not pending here. */
  refuse(workerId: string, code: number, reason: string): boolean;
  /** This instance holds the handshake, not yet answered (cluster effect ownership). */
  pending(workerId: string): boolean;
  /** Every handshake held here and not yet answered. */
  pendingIds(): string[];
};

type Attempt = {
  req: HttpRequest;
  socket: Duplex;
  head: Buffer;
  /** Forgets the attempt if the socket closes first; removed once answered. */
  onClose: () => void;
  /** Refuses the attempt if the core has not answered in time. */
  timer: ReturnType<typeof setTimeout>;
};

export type WorkerUpgrade = {
  onUpgrade: (req: HttpRequest, socket: Duplex, head: Buffer) => void;
  admission: WorkerAdmission;
  close: () => void;
};

const NOT_ANSWERED_IN_TIME = "the relay did not answer in time: try again";

export function makeWorkerUpgrade(deps: WorkerSocketDeps): WorkerUpgrade {
  // maxPayload in bytes: a UTF-8 character is at most 4 bytes.
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: deps.frameCharsMax * 4,
  });
  // Refused sockets only receive our close frame: nothing of theirs is kept.
  const refusals = new WebSocketServer({ noServer: true, maxPayload: 125 });
  const attempts = new Map<string, Attempt>();

  function onUpgrade(req: HttpRequest, socket: Duplex, head: Buffer): void {
    const screened = screenUpgrade(deps, req, socket);
    if (screened === null) return;
    const { url, secretValid } = screened;
    // A reset before the handshake: the socket closes, nothing to tell.
    socket.on("error", ignoreError);
    const workerId = newWorkerId();
    // Gone before the core answered: nothing to complete or refuse.
    const onClose = () => {
      const a = attempts.get(workerId);
      if (a !== undefined) clearTimeout(a.timer);
      attempts.delete(workerId);
    };
    const timer = setTimeout(
      () => unanswered(workerId),
      deps.answerTimeoutMs ?? 10_000,
    );
    attempts.set(workerId, { req, socket, head, onClose, timer });
    socket.on("close", onClose);
    deps.submit({
      kind: "workerConnectAttempted",
      atMs: deps.now(),
      workerId,
      provider: url.searchParams.get("provider") ?? deps.defaultProvider,
      clientIp: clientAddress(req, deps.trustedProxies),
      secretValid,
    });
  }

  // An answered attempt keeps no listener or closure of ours (issue 18).
  function forget(workerId: string, a: Attempt): void {
    attempts.delete(workerId);
    clearTimeout(a.timer);
    a.socket.off("close", a.onClose);
  }

  /** No answer in time: the worker is told to retry, the core forgets the attempt. */
  function unanswered(workerId: string): void {
    if (!refuse(workerId, TRY_AGAIN_CODE, NOT_ANSWERED_IN_TIME)) return;
    deps.submit({
      kind: "workerDisconnected",
      atMs: deps.now(),
      workerId,
      reason: "handshake not answered in time",
    });
  }

  function accept(workerId: string): boolean {
    const a = attempts.get(workerId);
    if (a === undefined) return false;
    forget(workerId, a);
    wss.handleUpgrade(
      a.req as unknown as IncomingMessage,
      a.socket,
      a.head,
      (ws) => admitted(deps, workerId, ws, a.socket),
    );
    return true;
  }

  function refuse(workerId: string, code: number, reason: string): boolean {
    const a = attempts.get(workerId);
    if (a === undefined) return false;
    forget(workerId, a);
    // The handshake completes so the worker reads the close code and reason, as
    // the original's workers expect (C41).
    refusals.handleUpgrade(
      a.req as unknown as IncomingMessage,
      a.socket,
      a.head,
      (ws) => refused(ws, a.socket, code, reason),
    );
    return true;
  }

  return {
    onUpgrade,
    admission: {
      accept,
      refuse,
      pending: (id) => attempts.has(id),
      pendingIds: () => [...attempts.keys()],
    },
    close: () => closeDoor(attempts, [wss, refusals]),
  };
}

/** The worker door shut: every held handshake cut, both WebSocket servers closed. */
function closeDoor(
  attempts: Map<string, Attempt>,
  servers: WebSocketServer[],
): void {
  for (const a of attempts.values()) {
    clearTimeout(a.timer);
    a.socket.destroy();
  }
  attempts.clear();
  for (const s of servers) s.close();
}

/**
 * What node:http answers itself, before any WebSocket: 404 off the worker path,
 * 503 over the connection cap (a worker with the right secret is exempt).
 * Null when answered here.
 */
function screenUpgrade(
  deps: WorkerSocketDeps,
  req: HttpRequest,
  socket: Duplex,
): { url: URL; secretValid: boolean } | null {
  const url = requestUrl(req.url);
  if (url === null || url.pathname !== "/v1/worker/connect") {
    socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    return null;
  }
  const presented = presentedSecret(req, url);
  const secretValid = secretsEqual(presented, deps.workerSecret) ||
    (presented !== "" && deps.workerKeyValid?.(presented) === true);
  if (secretValid) deps.cap?.exempt(req.socket);
  else if (deps.cap?.overCap(req.socket) === true) {
    socket.end(
      "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
    );
    return null;
  }
  return { url, secretValid };
}

/**
 * The secret a worker presented: the header, else the `secret` query
 * parameter, else the original's `worker_secret` (issue 32).
 */
function presentedSecret(req: HttpRequest, url: URL): string {
  const header = req.headers["x-worker-secret"];
  return (Array.isArray(header) ? header[0] : header) ??
    url.searchParams.get("secret") ??
    url.searchParams.get("worker_secret") ??
    "";
}

/** An admitted worker's socket, open: its frames and its close become core events. */
function admitted(
  deps: WorkerSocketDeps,
  workerId: string,
  ws: WebSocket,
  socket: Duplex,
): void {
  deps.sockets.set(workerId, ws);
  deps.rawSockets?.set(ws, socket);
  capUntilRegistered(deps, workerId, ws, socket);
  ws.on("message", (data, isBinary) => {
    deps.submit(
      isBinary
        // chunk-bytes-v1 (issue 18): the header is read, the bytes are not;
        // the frame limit counts bytes here.
        ? eventFromBinaryFrame(
          workerId,
          deps.now(),
          frameBytes(data),
          deps.frameCharsMax,
        )
        : eventFromFrame(
          workerId,
          deps.now(),
          data.toString(),
          deps.frameCharsMax,
        ),
    );
  });
  ws.on("close", (code, reason) => {
    deps.sockets.delete(workerId);
    const text = reason.toString();
    deps.submit({
      kind: "workerDisconnected",
      atMs: deps.now(),
      workerId,
      reason: text === "" ? `close code ${code}` : `${code} ${text}`,
    });
  });
  // Followed by "close", which carries the disconnect into the core.
  ws.on("error", ignoreError);
}

/** A binary message's bytes (`ws` hands a Buffer; the other shapes just in case). */
function frameBytes(data: Buffer | ArrayBuffer | Buffer[]): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  return data instanceof ArrayBuffer ? new Uint8Array(data) : data;
}

/** One no-op "error" listener for every socket, not a closure each. */
function ignoreError(): void {}

/**
 * Counts raw bytes until the core accepted `register`, so a socket that was
 * admitted but never registers cannot make us buffer a 64 MiB frame.
 */
function capUntilRegistered(
  deps: WorkerSocketDeps,
  workerId: string,
  ws: WebSocket,
  socket: Duplex,
): void {
  let received = 0;
  const onData = (chunk: Buffer) => {
    if (deps.isRegistered(workerId)) return socket.off("data", onData);
    received += chunk.length;
    if (received <= PRE_REGISTER_BYTES_MAX) return;
    socket.off("data", onData);
    ws.close(
      1009,
      `more than ${PRE_REGISTER_BYTES_MAX} bytes before register`,
    );
    socket.end();
    // Read nothing more of theirs; the close event ends the core's record.
    socket.pause();
    cutAfterLinger(ws, () => ws.terminate(), REFUSED_LINGER_MS);
  };
  socket.on("data", onData);
}

/**
 * A refused worker's socket, open only to read why: it is half-closed right
 * after our close frame and cut if the peer lingers.
 */
function refused(
  ws: WebSocket,
  socket: Duplex,
  code: number,
  reason: string,
): void {
  ws.on("error", () => {});
  ws.close(code, closeReason(reason));
  socket.end();
  cutAfterLinger(ws, () => ws.terminate(), REFUSED_LINGER_MS);
}
