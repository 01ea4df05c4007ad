// A raw keep-alive HTTP client for the instruction probes
// (instructions_probe.ts, instructions_split.ts): one connection sending a
// plain request, reading its whole answer, and again while any are left.

/** The bytes of one keep-alive POST /v1/chat/completions carrying `body`. */
export function plainRequest(body: string): Uint8Array {
  return new TextEncoder().encode(
    "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n" +
      "connection: keep-alive\r\ncontent-type: application/json\r\n" +
      `content-length: ${body.length}\r\n\r\n${body}`,
  );
}

/** Sends `request` one at a time on one connection while `left.n` > 0. */
export async function plainClient(
  port: number,
  request: Uint8Array,
  left: { n: number },
): Promise<void> {
  const decoder = new TextDecoder();
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  conn.setNoDelay(true);
  const buf = new Uint8Array(65536);
  while (left.n > 0) {
    left.n--;
    await conn.write(request);
    let got = "";
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) throw new Error("the server closed the connection");
      got += decoder.decode(buf.subarray(0, n));
      const headEnd = got.indexOf("\r\n\r\n");
      if (headEnd < 0) continue;
      const length = /content-length: (\d+)/i.exec(got.slice(0, headEnd));
      if (length === null) throw new Error("an answer without a length");
      if (got.length >= headEnd + 4 + Number(length[1])) break;
    }
  }
  conn.close();
}
