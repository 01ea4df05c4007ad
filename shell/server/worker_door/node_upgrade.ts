// node:http's `upgrade` event as the Upgrade the worker door and the peer
// links take (shell/ws/upgrade.ts), while the client door is node:http: the
// client's address (TRUSTED_PROXIES) and the connection cap are the door's.
// Goes when the door moves to Deno.listen (it builds the Upgrade itself).
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type Upgrade, upgradeOnNodeSocket } from "../../ws/upgrade.ts";
import { clientAddress, type TrustedProxies } from "../http/client_address.ts";
import type { ConnectionCap } from "../http/connection_cap.ts";

export function nodeUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Uint8Array,
  door: { trustedProxies: TrustedProxies; cap?: ConnectionCap },
): Upgrade {
  return upgradeOnNodeSocket(
    {
      method: req.method ?? "",
      url: req.url ?? "/",
      headers: req.headers,
      clientIp: clientAddress(req, door.trustedProxies),
      overCap: () => door.cap?.overCap(socket) === true,
      exempt: () => door.cap?.exempt(socket),
    },
    socket,
    head,
  );
}
