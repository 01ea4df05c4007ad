// The worker endpoint (C1, C2, C33, C41): GET /v1/worker/connect?provider=NAME
// upgraded to a WebSocket. The secret is compared (constant time) and the core
// admits or refuses while the upgrade is held, before the handshake completes
// (issue 15): a refused socket never reaches the frame parser, and an admitted
// one may send only a register-sized amount before its register is accepted.
// Socket callbacks only translate into core events. The client door hands the
// upgrade over as an `Upgrade` (shell/ws/upgrade.ts); the WebSocket is ours
// (shell/ws/, issue 31).
import {
  type Event,
  eventFromBinaryFrame,
  eventFromFrame,
} from "../../../core/mod.ts";
import type { WsConnection } from "../../ws/connection.ts";
import { badRequest, headerOf, upgradeProblem } from "../../ws/handshake.ts";
import type { Upgrade } from "../../ws/upgrade.ts";
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
  sockets: Map<string, WsConnection>;
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
  /** True once the core accepted this worker's register. */
  isRegistered: (workerId: string) => boolean;
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
  upgrade: Upgrade;
  /** Stops watching for the socket's close (the attempt is answered). */
  unwatch: () => void;
  /** Refuses the attempt if the core has not answered in time. */
  timer: ReturnType<typeof setTimeout>;
};

export type WorkerUpgrade = {
  /** Takes an upgrade request from the client door (any path: 404 off ours). */
  onUpgrade: (upgrade: Upgrade) => void;
  admission: WorkerAdmission;
  close: () => void;
};

const NOT_ANSWERED_IN_TIME = "the relay did not answer in time: try again";
/** Refused sockets only receive our close frame: nothing of theirs is kept. */
const REFUSED_MAX_PAYLOAD = 125;

export function makeWorkerUpgrade(deps: WorkerSocketDeps): WorkerUpgrade {
  const attempts = new Map<string, Attempt>();

  function onUpgrade(upgrade: Upgrade): void {
    const screened = screenUpgrade(deps, upgrade);
    if (screened === null) return;
    const { url, secretValid } = screened;
    const workerId = newWorkerId();
    const timer = setTimeout(
      () => unanswered(workerId),
      deps.answerTimeoutMs ?? 10_000,
    );
    // Gone before the core answered: nothing to complete or refuse.
    const unwatch = upgrade.onGone(() => {
      clearTimeout(timer);
      attempts.delete(workerId);
    });
    attempts.set(workerId, { upgrade, unwatch, timer });
    deps.submit({
      kind: "workerConnectAttempted",
      atMs: deps.now(),
      workerId,
      provider: url.searchParams.get("provider") ?? deps.defaultProvider,
      clientIp: upgrade.clientIp,
      secretValid,
    });
  }

  // An answered attempt keeps no listener or closure of ours (issue 18).
  function forget(workerId: string, a: Attempt): void {
    attempts.delete(workerId);
    clearTimeout(a.timer);
    a.unwatch();
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
    admitted(deps, workerId, a.upgrade);
    return true;
  }

  function refuse(workerId: string, code: number, reason: string): boolean {
    const a = attempts.get(workerId);
    if (a === undefined) return false;
    forget(workerId, a);
    refused(a.upgrade, code, reason);
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
    close: () => closeDoor(attempts),
  };
}

/** The worker door shut: every held handshake cut. */
function closeDoor(attempts: Map<string, Attempt>): void {
  for (const a of attempts.values()) {
    clearTimeout(a.timer);
    a.upgrade.destroy();
  }
  attempts.clear();
}

/**
 * What is answered before any WebSocket: 404 off the worker path, 400 for a
 * request that is not a valid upgrade, 503 over the connection cap (a worker
 * with the right secret is exempt). Null when answered here.
 */
function screenUpgrade(
  deps: WorkerSocketDeps,
  upgrade: Upgrade,
): { url: URL; secretValid: boolean } | null {
  const url = requestUrl(upgrade.url);
  if (url === null || url.pathname !== "/v1/worker/connect") {
    upgrade.reply("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    return null;
  }
  const problem = upgradeProblem(upgrade);
  if (problem !== null) {
    upgrade.reply(badRequest(problem));
    return null;
  }
  const presented = presentedSecret(upgrade, url);
  const secretValid = secretsEqual(presented, deps.workerSecret) ||
    (presented !== "" && deps.workerKeyValid?.(presented) === true);
  if (secretValid) upgrade.exempt();
  else if (upgrade.overCap()) {
    upgrade.reply(
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
function presentedSecret(upgrade: Upgrade, url: URL): string {
  return headerOf(upgrade.headers, "x-worker-secret") ??
    url.searchParams.get("secret") ??
    url.searchParams.get("worker_secret") ??
    "";
}

/** An admitted worker's socket, open: its frames and its close become core events. */
function admitted(
  deps: WorkerSocketDeps,
  workerId: string,
  upgrade: Upgrade,
): void {
  const ws = upgrade.accept({
    // In bytes: a UTF-8 character is at most 4 bytes.
    maxPayload: deps.frameCharsMax * 4,
  }, {
    onText: (text) =>
      deps.submit(
        eventFromFrame(workerId, deps.now(), text, deps.frameCharsMax),
      ),
    // chunk-bytes-v1 (issue 18): the header is read, the bytes are not; the
    // frame limit counts bytes here.
    onBinary: (bytes) =>
      deps.submit(
        eventFromBinaryFrame(workerId, deps.now(), bytes, deps.frameCharsMax),
      ),
    onClose: (code, reason) => {
      deps.sockets.delete(workerId);
      deps.submit({
        kind: "workerDisconnected",
        atMs: deps.now(),
        workerId,
        reason: reason === "" ? `close code ${code}` : `${code} ${reason}`,
      });
    },
    onRead: (bytes) => cap(bytes),
  });
  // Not a valid upgrade after all (screened before the core saw it, so
  // never): answered 400; the core's register timeout ends its record.
  if (ws === null) return;
  deps.sockets.set(workerId, ws);
  const cap = capUntilRegistered(deps, workerId, ws);
}

/**
 * Counts raw bytes until the core accepted `register`, so a socket that was
 * admitted but never registers cannot make us buffer a 64 MiB frame: past
 * PRE_REGISTER_BYTES_MAX it is closed 1009, nothing more of it is kept, and
 * it is cut if it lingers.
 */
function capUntilRegistered(
  deps: WorkerSocketDeps,
  workerId: string,
  ws: WsConnection,
): (bytes: number) => void {
  let received = 0;
  let done = false;
  return (bytes) => {
    if (done) return;
    if (deps.isRegistered(workerId)) {
      done = true;
      return;
    }
    received += bytes;
    if (received <= PRE_REGISTER_BYTES_MAX) return;
    done = true;
    ws.close(1009, `more than ${PRE_REGISTER_BYTES_MAX} bytes before register`);
    cutAfterLinger(ws, () => ws.terminate(), REFUSED_LINGER_MS);
  };
}

/**
 * A refused worker's socket, open only to read why: our close frame leaves
 * with the 101, our side ends right after it, and the socket is cut if the
 * peer lingers.
 */
function refused(upgrade: Upgrade, code: number, reason: string): void {
  const ws = upgrade.accept({ maxPayload: REFUSED_MAX_PAYLOAD }, {
    onText: ignore,
    onBinary: ignore,
    onClose: ignore,
  });
  if (ws === null) return;
  ws.close(code, closeReason(reason));
  cutAfterLinger(ws, () => ws.terminate(), REFUSED_LINGER_MS);
}

function ignore(): void {}
