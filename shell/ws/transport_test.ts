import assert from "node:assert/strict";
import { connTransport } from "./transport.ts";

/** A connected pair of TCP sockets on loopback. */
async function pair(): Promise<[Deno.Conn, Deno.Conn]> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const [a, b] = await Promise.all([
    listener.accept(),
    Deno.connect({ hostname: "127.0.0.1", port: listener.addr.port }),
  ]);
  listener.close();
  return [a, b];
}

const until = async (f: () => boolean) => {
  while (!f()) await new Promise((r) => setTimeout(r, 5));
};

Deno.test("issue 31: a second read hands a socket's reads to new callbacks; the first hear nothing more, and the end reaches the second once", async () => {
  const [ours, peer] = await pair();
  const t = connTransport(ours);
  const first: string[] = [];
  const second: string[] = [];
  let firstEnds = 0;
  let secondEnds = 0;
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  t.read((b) => first.push(text(b)), () => firstEnds++);
  await peer.write(new TextEncoder().encode("early"));
  await until(() => first.length === 1);
  t.read((b) => second.push(text(b)), () => secondEnds++);
  await peer.write(new TextEncoder().encode("later"));
  await until(() => second.length === 1);
  peer.close();
  await until(() => secondEnds === 1);
  assert.deepEqual(first, ["early"]);
  assert.deepEqual(second, ["later"]);
  assert.equal(firstEnds, 0);
  // After the end, a new reader hears the end at once, and only it.
  let lateEnds = 0;
  t.read(() => {}, () => lateEnds++);
  assert.equal(lateEnds, 1);
  assert.equal(secondEnds, 1);
  t.close();
});
