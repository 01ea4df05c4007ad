// An upgrade request leaves the door (issue 31): the Upgrade the worker door
// and the peer links take (shell/ws/upgrade.ts), built from the door's parsed
// request with what only the door knows: the client's address
// (TRUSTED_PROXIES) and the connection's place in MAX_CONNECTIONS.
import { type Upgrade, upgradeOnConn } from "../../ws/upgrade.ts";
import { clientAddress, type TrustedProxies } from "../http/client_address.ts";
import type { ConnectionCap } from "../http/connection_cap.ts";
import type { HttpRequest } from "./exchange.ts";

/** The door's `upgrade` handler's arguments as an Upgrade; `closed` is reported once the connection closes. */
export function connUpgrade(
  req: HttpRequest,
  conn: Deno.TcpConn,
  head: Uint8Array,
  closed: () => void,
  door: { trustedProxies: TrustedProxies; cap?: ConnectionCap },
): Upgrade {
  // The closures keep the peer and the cap, not the request (they live as
  // long as the worker's connection).
  const peer = req.socket;
  const cap = door.cap;
  return upgradeOnConn(
    {
      method: req.method,
      url: req.url,
      headers: req.headers,
      clientIp: clientAddress(req, door.trustedProxies),
      overCap: () => cap?.overCap(peer) === true,
      exempt: () => cap?.exempt(peer),
    },
    countedConn(conn, closed),
    head,
  );
}

/**
 * `conn`, reporting its close once: the WebSocket side closes every connection
 * it ends (shell/ws/transport.ts), so the count of open connections sees the
 * end of one the door no longer reads.
 */
function countedConn(conn: Deno.TcpConn, closed: () => void): Deno.TcpConn {
  const close = conn.close.bind(conn);
  let counted = false;
  conn.close = () => {
    if (!counted) {
      counted = true;
      closed();
    }
    close();
  };
  return conn;
}
