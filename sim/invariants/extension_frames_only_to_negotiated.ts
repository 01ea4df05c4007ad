// extensionFramesOnlyToNegotiated (I9): extension frames (lifecycle_request) go
// only to workers that listed the extension; register_ack carries extensions
// only for workers that sent the field; unnegotiated capabilities are ignored.
// So an original worker never sees a frame it does not know.
import {
  EXTENSION_LIFECYCLE,
  SERVER_MESSAGE_TYPES,
  type State,
} from "../../core/mod.ts";
import type { MWorker } from "../model/model.ts";
import type { Check } from "./catalog.ts";

/** Server -> worker frames that belong to an extension, and which one. */
const EXTENSION_FRAMES: Record<string, string> = {
  lifecycle_request: EXTENSION_LIFECYCLE,
};
/** Every other server frame is base protocol: any worker may get it. */
const BASE_FRAMES: ReadonlySet<string> = new Set(
  SERVER_MESSAGE_TYPES.filter((t) => EXTENSION_FRAMES[t] === undefined),
);

/** register_ack has an extensions field exactly when the register had one. */
export function ackExtensionsOnlyWhenListed(
  check: Check,
  w: MWorker,
  ackExtensions: string[] | null | undefined,
  listed: string[] | null,
): void {
  check(
    (ackExtensions != null) === (listed !== null),
    "extensionFramesOnlyToNegotiated",
    () =>
      `register_ack to ${w.conn} ${
        ackExtensions == null ? "without" : "with"
      } extensions, but its register ${
        listed === null ? "had no extensions field" : `listed ${listed}`
      }`,
  );
}

/** Any other frame: base protocol, or its extension negotiated with a registered worker. */
export function frameNegotiated(
  check: Check,
  conn: string,
  w: MWorker | undefined,
  type: string,
): void {
  const needs = EXTENSION_FRAMES[type];
  check(
    BASE_FRAMES.has(type) ||
      (needs !== undefined && w?.registered === true && w.ext.has(needs)),
    "extensionFramesOnlyToNegotiated",
    () =>
      `${type} sent to ${conn}, which ${
        w === undefined
          ? "is not connected"
          : !w.registered
          ? "is not registered"
          : w.listed == null
          ? "sent no extensions field (original-style)"
          : `listed only ${w.listed}`
      }`,
  );
}

/** capabilities from a worker that did not negotiate capabilities-v1 are not kept. */
export function capabilitiesIgnored(
  check: Check,
  state: State,
  conn: string,
  w: MWorker,
): void {
  check(
    (state.workers.get(conn)?.capabilities ?? null) === null,
    "extensionFramesOnlyToNegotiated",
    () => `capabilities from ${conn} kept although it listed ${w.listed}`,
  );
}
