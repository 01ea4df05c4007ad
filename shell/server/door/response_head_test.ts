import assert from "node:assert/strict";
import { type HeadPlan, renderHead } from "./response_head.ts";

const plan = (p: Partial<HeadPlan>): HeadPlan => ({
  status: 200,
  headers: { "content-type": "text/plain" },
  noBody: false,
  knownLength: -1,
  keepAlive: true,
  http11: true,
  ...p,
});

/** The head without its Date line (the clock's). */
function text(p: Partial<HeadPlan>): string {
  return renderHead(plan(p)).text.replace(/Date: [^\r]*\r\n/, "");
}

Deno.test("door head: a known length is Content-Length, an unknown one chunked on HTTP/1.1 and close-delimited on 1.0", () => {
  assert.equal(
    text({ knownLength: 5 }),
    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nConnection: keep-alive\r\nKeep-Alive: timeout=65\r\nContent-Length: 5\r\n\r\n",
  );
  const chunked = renderHead(plan({}));
  assert.equal(chunked.framing, "chunked");
  assert.match(chunked.text, /Transfer-Encoding: chunked\r\n\r\n$/);
  const v10 = renderHead(plan({ http11: false }));
  assert.equal(v10.framing, "close");
  assert.equal(v10.keepAlive, false);
  assert.match(v10.text, /Connection: close\r\n\r\n$/);
  // HTTP/1.0 with keep-alive asked and the length known: kept.
  const v10ka = renderHead(plan({ http11: false, knownLength: 2 }));
  assert.equal(v10ka.keepAlive, true);
});

Deno.test("door head: HEAD, 204 and 304 carry no framing; a length the route set is kept", () => {
  for (const p of [{ noBody: true }, { noBody: true, status: 204 }]) {
    const h = renderHead(plan({ ...p, knownLength: 10 }));
    assert.equal(h.framing, "none");
    assert.doesNotMatch(h.text, /Content-Length|Transfer-Encoding/);
  }
  const head = renderHead(
    plan({ noBody: true, headers: { "content-length": "42" } }),
  );
  assert.match(head.text, /content-length: 42\r\n/);
  assert.doesNotMatch(head.text, /Content-Length|Transfer-Encoding/);
});

Deno.test("door head: the route's Connection, Date and Content-Length are the route's", () => {
  const h = renderHead(plan({
    headers: { connection: "close", date: "x", "content-length": "3" },
    knownLength: 3,
  }));
  assert.equal(h.keepAlive, false);
  assert.equal(h.framing, "length");
  assert.equal(
    h.text,
    "HTTP/1.1 200 OK\r\nconnection: close\r\ndate: x\r\ncontent-length: 3\r\n\r\n",
  );
  assert.match(renderHead(plan({})).text, /\r\nDate: \w{3}, \d\d \w{3} \d{4} /);
  assert.match(
    renderHead(plan({ status: 431 })).text,
    /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/,
  );
});
