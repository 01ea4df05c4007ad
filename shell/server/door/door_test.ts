// The client door over real sockets: what a client sees on the wire.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { rawConnect } from "../_raw_socket.ts";
import { waitFor } from "../../procs.ts";
import { answerUnparsable } from "../http/http_reply.ts";
import { type Door, type DoorHandlers, openDoor } from "./door.ts";
import type { HttpRequest, HttpResponse } from "./exchange.ts";

type Route = (req: HttpRequest, res: HttpResponse) => void;

async function withDoor(
  route: Route,
  fn: (door: Door) => Promise<void>,
  extra: Partial<DoorHandlers> = {},
): Promise<void> {
  const door = openDoor("127.0.0.1", 0, {
    request: route,
    upgrade: (_req, conn, _head, closed) => {
      conn.close();
      closed();
    },
    unparsable: answerUnparsable,
    ...extra,
  });
  try {
    await fn(door);
  } finally {
    await door.close();
  }
}

/** Reads the body, then answers it back with `content-type: text/plain`. */
const echo: Route = (req, res) => {
  let body = "";
  req.on("data", (c) => body += c.toString("latin1"));
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`${req.method} ${req.url} ${body}`);
  });
};

/** What the server sent once it sent `until` (a regex on everything so far). */
async function exchange(
  port: number,
  input: string,
  until: RegExp,
): Promise<string> {
  const c = await rawConnect(port);
  try {
    await c.write(input);
    await waitFor(
      `an answer matching ${until}`,
      () => until.test(c.received()),
    );
    return c.received().replace(/Date: [^\r]*\r\n/g, "");
  } finally {
    c.close();
  }
}

Deno.test("door: a whole answer goes out with Content-Length, Date and keep-alive as node:http wrote them", async () => {
  await withDoor(echo, async (door) => {
    const got = await exchange(
      door.port,
      "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi",
      /POST \/a hi$/,
    );
    assert.equal(
      got,
      "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nConnection: keep-alive\r\nKeep-Alive: timeout=65\r\nContent-Length: 10\r\n\r\nPOST /a hi",
    );
  });
});

Deno.test("door: pipelined requests are answered in order, in one write when ready together", async () => {
  await withDoor(echo, async (door) => {
    const got = await exchange(
      door.port,
      "POST /1 HTTP/1.1\r\nContent-Length: 1\r\n\r\naGET /2 HTTP/1.1\r\n\r\nPOST /3 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nc\r\n0\r\n\r\n",
      /POST \/3 c$/,
    );
    assert.deepEqual(got.match(/(?:POST|GET) \/\d [a-c]?(?=HTTP\/|$)/g), [
      "POST /1 a",
      "GET /2 ",
      "POST /3 c",
    ]);
  });
});

Deno.test("door: a stream is chunked on HTTP/1.1, runs to the close on HTTP/1.0", async () => {
  const stream: Route = (req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write("data: 1\n\n");
    setTimeout(() => res.end("data: 2\n\n"), 10);
  };
  await withDoor(stream, async (door) => {
    const v11 = await exchange(
      door.port,
      "GET / HTTP/1.1\r\n\r\n",
      /0\r\n\r\n$/,
    );
    assert.match(
      v11,
      /Transfer-Encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n$/,
    );
    const c = await rawConnect(door.port);
    await c.write("GET / HTTP/1.0\r\n\r\n");
    await c.ended;
    assert.match(
      c.received(),
      /Connection: close\r\n\r\ndata: 1\n\ndata: 2\n\n$/,
    );
    c.close();
  });
});

Deno.test("door: HEAD and 204 answers carry no body and no framing", async () => {
  const route: Route = (req, res) => {
    res.writeHead(req.url === "/none" ? 204 : 200, { "x-a": "1" });
    res.end("body");
  };
  await withDoor(route, async (door) => {
    const got = await exchange(
      door.port,
      "HEAD / HTTP/1.1\r\n\r\nGET /none HTTP/1.1\r\n\r\n",
      /204 No Content[^]*\r\n\r\n$/,
    );
    assert.doesNotMatch(got, /body|Content-Length|Transfer-Encoding/);
  });
});

Deno.test("door: Expect 100-continue is answered before the body; another expectation is 417", async () => {
  await withDoor(echo, async (door) => {
    const c = await rawConnect(door.port);
    await c.write(
      "POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
    );
    await waitFor("100 Continue", () => c.received().includes("100 Continue"));
    await c.write("ok");
    await waitFor("the answer", () => c.received().endsWith("POST /e ok"));
    assert.match(
      c.received(),
      /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/,
    );
    c.close();
    const got = await exchange(
      door.port,
      "POST /e HTTP/1.1\r\nExpect: teapot\r\nContent-Length: 0\r\n\r\n",
      /\r\n\r\n$/,
    );
    assert.match(got, /^HTTP\/1\.1 417 Expectation Failed/);
  });
});

Deno.test("door: malformed and oversized requests get the JSON 400 and 431, then the close", async () => {
  await withDoor(echo, async (door) => {
    for (
      const [input, status] of [
        [
          "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
          400,
        ],
        ["GET / HTTP/1.1\r\nX: " + "a".repeat(17 * 1024) + "\r\n\r\n", 431],
        ["\x16\x03\x01\x02\x00", 400],
      ] as const
    ) {
      const c = await rawConnect(door.port);
      await c.write(input);
      await c.ended;
      assert.match(c.received(), new RegExp(`^HTTP/1\\.1 ${status} `));
      assert.match(c.received(), /connection: close/);
      assert.match(c.received(), /"error":\{/);
      c.close();
    }
  });
});

Deno.test("door: a client that leaves while its request waits is noticed at once", async () => {
  const closed: string[] = [];
  const wait: Route = (req, res) => {
    req.resume();
    res.on("close", () => closed.push(req.url));
  };
  await withDoor(wait, async (door) => {
    const c = await rawConnect(door.port);
    await c.write("POST /queued HTTP/1.1\r\nContent-Length: 2\r\n\r\n");
    await c.write("{}"); // the body in a separate write (C46)
    await waitFor("the request to arrive", () => door.port > 0);
    c.close();
    await waitFor("the response's close", () => closed.length === 1);
    assert.deepEqual(closed, ["/queued"]);
  });
});

Deno.test("door: a write past the high-water mark returns false, and drain follows once the client reads", async () => {
  let result: boolean[] = [];
  let drained = false;
  const big: Route = (req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/octet-stream" });
    const chunk = new Uint8Array(256 * 1024);
    result = [res.write(chunk), res.write(chunk)];
    res.once("drain", () => {
      drained = true;
      res.end();
    });
  };
  await withDoor(big, async (door) => {
    const c = await rawConnect(door.port);
    await c.write("GET / HTTP/1.1\r\n\r\n");
    await waitFor("drain", () => drained);
    assert.deepEqual(result, [false, false]);
    c.close();
  });
});

Deno.test("door: an answer sent before the request's body arrived closes the connection", async () => {
  const early: Route = (_req, res) => {
    res.writeHead(404);
    res.end("no");
  };
  await withDoor(early, async (door) => {
    const c = await rawConnect(door.port);
    await c.write("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
    await c.ended;
    assert.match(c.received(), /^HTTP\/1\.1 404/);
    c.close();
  });
});

Deno.test("door: heads and bodies larger than a read arrive whole, Content-Length and chunked", async () => {
  const big = "x".repeat(100_000);
  const header = "a".repeat(3000);
  await withDoor(echo, async (door) => {
    const got = await exchange(
      door.port,
      `POST /big HTTP/1.1\r\nX-Long: ${header}\r\nContent-Length: ${big.length}\r\n\r\n${big}` +
        `POST /chunked HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n${
          big.length.toString(16)
        }\r\n${big}\r\n0\r\n\r\n`,
      /POST \/chunked x{100000}$/,
    );
    assert.ok(got.includes(`POST /big ${big}HTTP/1.1 200 OK`));
  });
});

Deno.test("door: whenBodyPending runs once the head's read is over and only if the body is still missing", async () => {
  const pending: string[] = [];
  const route: Route = (req, res) => {
    req.whenBodyPending(() => pending.push(req.url));
    echo(req, res);
  };
  await withDoor(route, async (door) => {
    // The body with its head, then a pipelined one with its body: no call.
    await exchange(
      door.port,
      "POST /whole HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiPOST /also HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
      /POST \/also x$/,
    );
    assert.deepEqual(pending, []);
    // The head alone, its body in a later write: one call, before the body.
    const c = await rawConnect(door.port);
    try {
      await c.write("POST /later HTTP/1.1\r\nContent-Length: 2\r\n\r\n");
      await waitFor("the pending call", () => pending.length === 1);
      await c.write("ok");
      await waitFor("the answer", () => /POST \/later ok$/.test(c.received()));
      assert.deepEqual(pending, ["/later"]);
    } finally {
      c.close();
    }
  });
});

Deno.test("door: text and bytes queued in one turn leave as their exact UTF-8 and bytes, in order", async () => {
  const route: Route = (req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
    res.write("é€😀 ");
    res.write(new Uint8Array([0x62, 0x79, 0x74, 0x65, 0x73]));
    res.end(" ✓");
  };
  await withDoor(route, async (door) => {
    const c = await rawConnect(door.port);
    try {
      await c.write("GET /mixed HTTP/1.1\r\n\r\n");
      await waitFor("the last chunk", () => c.received().endsWith("0\r\n\r\n"));
      const got = c.received();
      const body = got.slice(got.indexOf("\r\n\r\n") + 4);
      // Each piece its own chunk, sized in bytes (é 2, € 3, 😀 4, the space
      // 1); received() reads the bytes as latin1.
      const utf8 = (t: string) => Buffer.from(t, "utf8").toString("latin1");
      assert.equal(
        body,
        `a\r\n${utf8("é€😀 ")}\r\n5\r\nbytes\r\n4\r\n${
          utf8(" ✓")
        }\r\n0\r\n\r\n`,
      );
    } finally {
      c.close();
    }
  });
});

Deno.test("door: large bodies on many connections at once, request after request, each arrive as sent (read buffers are reused)", async () => {
  // Each body larger than the small read buffer and than one large one, and
  // different on every connection and request: a buffer handed to the next
  // request while something still read from it would mix them.
  const body = (conn: number, i: number) =>
    `${conn}-${i}-` +
    String.fromCharCode(97 + (conn * 7 + i) % 26).repeat(20_000 + conn * 97);
  await withDoor(echo, async (door) => {
    await Promise.all([0, 1, 2, 3, 4].map(async (conn) => {
      const c = await rawConnect(door.port);
      try {
        let want = "";
        for (let i = 0; i < 4; i++) {
          const b = body(conn, i);
          await c.write(
            `POST /r${i} HTTP/1.1\r\nContent-Length: ${b.length}\r\n\r\n${b}`,
          );
          want += `POST /r${i} ${b}`;
          await waitFor(
            `answer ${i} on connection ${conn}`,
            () => c.received().endsWith(`POST /r${i} ${b}`),
          );
        }
        const got = c.received().replace(
          /HTTP\/1\.1 200 OK\r\n[^]*?\r\n\r\n/g,
          "",
        );
        assert.equal(got, want);
      } finally {
        c.close();
      }
    }));
  });
});
