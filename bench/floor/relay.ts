// The floor of issue 31: the least CPU a two-process relay on Deno can spend
// per request. It is a byte tunnel, not a relay: the server multiplexes each
// client connection's bytes onto one TCP link to the worker, the worker pipes
// each stream to a backend connection of its own, and nothing is parsed
// (no HTTP, no JSON, no WebSocket, no queue, no routing, no timers). Every hop
// is one read and one write, like ours. Whatever a real relay does on top of
// this (parse a request, pick a worker, frame it, account for it) is what
// bench/floor.ts measures as "above the floor".
//
//   deno run --allow-net=127.0.0.1 bench/floor/relay.ts server <client-port> <link-port>
//   deno run --allow-net bench/floor/relay.ts worker <link-port> <backend-host:port>
//
// The link's frame: stream id (u32), length (u32), bytes; length 0 closes the
// stream.

const HEAD = 8;

/** One frame: id, length, payload; an empty payload closes the stream. */
function frame(id: number, bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(HEAD + bytes.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, id);
  view.setUint32(4, bytes.length);
  out.set(bytes, HEAD);
  return out;
}

/** Reads the link and calls `on` once per whole frame. */
async function readFrames(
  link: Deno.Conn,
  on: (id: number, bytes: Uint8Array) => void,
): Promise<void> {
  const buf = new Uint8Array(256 * 1024);
  let held = new Uint8Array(0);
  for (;;) {
    const n = await link.read(buf);
    if (n === null) return;
    let data = buf.subarray(0, n);
    if (held.length > 0) {
      const joined = new Uint8Array(held.length + n);
      joined.set(held);
      joined.set(data, held.length);
      data = joined;
    }
    while (data.length >= HEAD) {
      const view = new DataView(data.buffer, data.byteOffset, HEAD);
      const len = view.getUint32(4);
      if (data.length < HEAD + len) break;
      on(view.getUint32(0), data.slice(HEAD, HEAD + len));
      data = data.subarray(HEAD + len);
    }
    held = data.slice();
  }
}

/** Copies one socket's reads to `send` until it ends, then calls `end`. */
async function pump(
  conn: Deno.Conn,
  send: (bytes: Uint8Array) => void,
  end: () => void,
): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      send(buf.slice(0, n));
    }
  } catch {
    // A reset is an end like any other here.
  }
  end();
}

async function server(clientPort: number, linkPort: number): Promise<void> {
  const links = Deno.listen({ hostname: "127.0.0.1", port: linkPort });
  const door = Deno.listen({ hostname: "127.0.0.1", port: clientPort });
  console.log(`floor server listening on 127.0.0.1:${clientPort}`);
  const link = await links.accept();
  link.setNoDelay(true);
  const clients = new Map<number, Deno.Conn>();
  readFrames(link, (id, bytes) => {
    const c = clients.get(id);
    if (c === undefined) return;
    if (bytes.length === 0) {
      clients.delete(id);
      c.close();
    } else c.write(bytes).catch(() => {});
  });
  let next = 1;
  for await (const c of door) {
    c.setNoDelay(true);
    const id = next++;
    clients.set(id, c);
    pump(c, (b) => link.write(frame(id, b)), () => {
      if (clients.delete(id)) link.write(frame(id, new Uint8Array(0)));
    });
  }
}

async function worker(linkPort: number, backend: string): Promise<void> {
  const [hostname = "127.0.0.1", port = "80"] = backend.split(":");
  const link = await Deno.connect({ hostname: "127.0.0.1", port: linkPort });
  link.setNoDelay(true);
  // A stream's backend connection, or its connect while it is under way
  // (frames that arrive meanwhile wait on it, in order).
  const streams = new Map<number, Deno.Conn | Promise<Deno.Conn>>();
  const open = (id: number): Promise<Deno.Conn> => {
    const conn = Deno.connect({ hostname, port: Number(port) }).then((c) => {
      c.setNoDelay(true);
      if (streams.has(id)) streams.set(id, c);
      pump(c, (b) => link.write(frame(id, b)), () => {
        if (streams.delete(id)) link.write(frame(id, new Uint8Array(0)));
      });
      return c;
    });
    streams.set(id, conn);
    return conn;
  };
  console.log("floor worker connected");
  await readFrames(link, (id, bytes) => {
    const known = streams.get(id);
    if (bytes.length === 0) {
      streams.delete(id);
      if (known !== undefined) Promise.resolve(known).then((c) => c.close());
      return;
    }
    if (known !== undefined && !(known instanceof Promise)) {
      known.write(bytes).catch(() => {});
    } else {
      (known ?? open(id)).then((c) => c.write(bytes)).catch(() => {});
    }
  });
}

const [role, a, b] = Deno.args;
if (role === "server" && a !== undefined && b !== undefined) {
  await server(Number(a), Number(b));
} else if (role === "worker" && a !== undefined && b !== undefined) {
  await worker(Number(a), b);
} else {
  console.error(
    "usage: relay.ts server <client-port> <link-port> | worker <link-port> <backend-host:port>",
  );
  Deno.exit(2);
}
