// The one request-body reader for client, admin and lifecycle routes (issue 15):
// a body larger than the route's limit is refused with 413 as soon as that is
// known, and one that has not arrived in full within BODY_TIMEOUT_SECS with
// 408; either way the answer is the connection's last. The timeout is a
// transport bound like a socket timeout: the request does not exist for the
// core until its body is complete, so there is nothing for the core to decide.
import type { HttpRequest, HttpResponse } from "../door/exchange.ts";
import { apiError, type ClientError } from "../../../core/mod.ts";
import { closeAfterAnswer } from "./http_reply.ts";

export type BodyLimits = { maxBytes: number; timeoutMs: number };

/**
 * Reads the whole body, then calls `onBody`; on a refusal it marks the
 * connection to close and calls `onRefused`, which sends the error in the
 * route's own shape. A client that leaves mid-body gets neither.
 */
export function readBody(
  req: HttpRequest,
  res: HttpResponse,
  limits: BodyLimits,
  onBody: (body: Buffer) => void,
  onRefused: (error: ClientError) => void,
): void {
  let settled = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const refuse = (error: ClientError) => {
    settled = true;
    if (timer !== undefined) clearTimeout(timer);
    closeAfterAnswer(res);
    onRefused(error);
  };
  const tooLarge = (): ClientError =>
    apiError("body_too_large", { max: limits.maxBytes });
  // The clock starts with the head's read; a body that came with it (almost
  // every one) never needs the timer, so it is armed only when still missing.
  req.whenBodyPending(() => {
    if (settled) return;
    timer = setTimeout(() => {
      if (settled) return;
      const secs = Math.round(limits.timeoutMs / 100) / 10;
      refuse(apiError("body_timeout", { secs }));
    }, limits.timeoutMs);
  });
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > limits.maxBytes) return refuse(tooLarge());
  const parts: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer) => {
    if (settled) return;
    size += chunk.length;
    if (size > limits.maxBytes) return refuse(tooLarge());
    parts.push(chunk);
  };
  // Once the body is in (or the client left), nothing of the reader is kept:
  // the listeners would otherwise hold the body, the timer and these closures
  // for as long as the response streams (issue 18).
  const done = () => {
    settled = true;
    if (timer !== undefined) clearTimeout(timer);
    req.off("data", onData);
    req.off("end", onEnd);
    req.off("close", onClose);
  };
  const onEnd = () => {
    if (settled) return;
    done();
    // Most bodies arrive in one read: no Buffer.concat copy then.
    onBody(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  };
  const onClose = () => {
    if (!settled) done();
  };
  req.on("data", onData);
  req.on("end", onEnd);
  req.on("close", onClose);
}

/** A body read as JSON: its value, or not JSON at all (each route words that 400). */
export type JsonBody = { kind: "json"; value: unknown } | { kind: "notJson" };

/**
 * readBody, then JSON.parse. With `emptyIsObject` a blank body reads as `{}`
 * (admin calls with nothing to say); otherwise it is not JSON.
 */
export function readJsonBody(
  req: HttpRequest,
  res: HttpResponse,
  limits: BodyLimits & { emptyIsObject: boolean },
  onBody: (body: JsonBody) => void,
  onRefused: (error: ClientError) => void,
): void {
  readBody(req, res, limits, (bytes) => {
    const text = bytes.toString("utf8");
    if (limits.emptyIsObject && text.trim() === "") {
      return onBody({ kind: "json", value: {} });
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return onBody({ kind: "notJson" });
    }
    onBody({ kind: "json", value });
  }, onRefused);
}
