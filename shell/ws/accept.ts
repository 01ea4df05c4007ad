// The server's side of an upgrade (issue 31): given the request, its socket
// and the bytes read past the request head, answers 101 itself and returns an
// open connection; or answers 400 when the request is not an upgrade we take.
// upgrade.ts holds a request until it is answered.
import {
  type ConnectionOptions,
  makeConnection,
  type WsConnection,
  type WsEvents,
} from "./connection.ts";
import {
  badRequest,
  headerOf,
  switchingProtocols,
  upgradeProblem,
  type UpgradeRequest,
} from "./handshake.ts";
import type { Transport } from "./transport.ts";

export type AcceptOptions = Omit<ConnectionOptions, "role">;

const encoder = new TextEncoder();

/**
 * Completes the handshake on `transport`: the 101 answer leaves in the same
 * write as the first frames sent on the returned connection (a refusal's
 * close frame with it). Null when `req` is not a valid upgrade: it was
 * answered 400 and the socket ended.
 */
export function acceptOn(
  req: UpgradeRequest,
  transport: Transport,
  leftover: Uint8Array,
  opts: AcceptOptions,
  events: WsEvents,
): WsConnection | null {
  const problem = upgradeProblem(req);
  if (problem !== null) {
    transport.write(encoder.encode(badRequest(problem))).then(
      () => transport.closeWrite(),
      () => transport.close(),
    );
    // Read and dropped until the peer ends.
    transport.read(() => {}, () => transport.close());
    return null;
  }
  const opening = makeConnection({ ...opts, role: "server" }, events);
  const key = headerOf(req.headers, "sec-websocket-key")!;
  opening.open(transport, leftover, encoder.encode(switchingProtocols(key)));
  return opening.connection;
}
