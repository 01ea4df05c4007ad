// Preloaded by bench/hop_trace.ts (`deno run --preload bench/hop_stamp.ts`)
// into the server and the worker: stamps every socket read as JavaScript sees
// it and every write as JavaScript asks for it, on the host's wall clock
// (performance.timeOrigin + performance.now(), the same in every process), and
// writes them to HOP_STAMP_FILE on SIGUSR2. A Deno.Conn (the door, our
// WebSocket) and node:net (the worker's backend client) are both covered.
// Bench only: nothing of the relay imports it.
import net from "node:net";

const stamps: number[] = []; // [time, kind, socket, bytes] repeated
const READ = 0;
const WRITE = 1;
/** The microtask after a write: roughly where the writing turn's own work ends. */
const AFTER = 2;
const ids = new WeakMap<object, number>();
let nextId = 1;
const now = () => performance.timeOrigin + performance.now();

function id(o: object): number {
  let n = ids.get(o);
  if (n === undefined) ids.set(o, n = nextId++);
  return n;
}

function stamp(kind: number, socket: object, bytes: number): void {
  if (stamps.length >= 4_000_000) return;
  stamps.push(now(), kind, id(socket), bytes);
  if (kind === WRITE) queueMicrotask(() => stamp(AFTER, socket, bytes));
}

/** Patches a Deno.Conn's class once, the first time one is seen. */
const patched = new WeakSet<object>();
function patchConn(conn: Deno.Conn): Deno.Conn {
  const proto = Object.getPrototypeOf(conn);
  if (patched.has(proto)) return conn;
  patched.add(proto);
  const read = proto.read;
  const write = proto.write;
  proto.read = async function (this: Deno.Conn, buf: Uint8Array) {
    const n = await read.call(this, buf);
    if (n !== null) stamp(READ, this, n);
    return n;
  };
  proto.write = function (this: Deno.Conn, buf: Uint8Array) {
    stamp(WRITE, this, buf.length);
    return write.call(this, buf);
  };
  return conn;
}

const listen = Deno.listen;
// deno-lint-ignore no-explicit-any
(Deno as any).listen = (opts: Deno.TcpListenOptions) => {
  const l = listen(opts);
  const accept = l.accept.bind(l);
  // deno-lint-ignore no-explicit-any
  (l as any).accept = async () => patchConn(await accept());
  // deno-lint-ignore no-explicit-any
  (l as any)[Symbol.asyncIterator] = async function* () {
    for (;;) yield patchConn(await accept());
  };
  return l;
};
const connect = Deno.connect;
// deno-lint-ignore no-explicit-any
(Deno as any).connect = async (opts: Deno.ConnectOptions) =>
  patchConn(await connect(opts));

const emit = net.Socket.prototype.emit;
net.Socket.prototype.emit = function (
  this: net.Socket,
  event: string | symbol,
  ...args: unknown[]
) {
  if (event === "data") stamp(READ, this, (args[0] as Uint8Array).length);
  return emit.apply(this, [event, ...args] as Parameters<typeof emit>);
};
const nodeWrite = net.Socket.prototype.write;
// deno-lint-ignore no-explicit-any
net.Socket.prototype.write = function (this: net.Socket, ...args: any[]) {
  const chunk = args[0] as string | Uint8Array;
  stamp(WRITE, this, typeof chunk === "string" ? chunk.length : chunk.length);
  return nodeWrite.apply(this, args as Parameters<typeof nodeWrite>);
};

Deno.addSignalListener("SIGUSR2", () => {
  const file = Deno.env.get("HOP_STAMP_FILE");
  if (file === undefined) return;
  Deno.writeTextFileSync(file, JSON.stringify(stamps));
});
