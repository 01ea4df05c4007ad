// Issue 33 (LOW 11): pieces trusted the instance id a link claims. Any holder
// of the cluster secret could open a peer link under any name and write into
// another instance's stream. Now the client's instance takes a piece only from
// the instance holding the piece's worker, by its replica of the log
// (core/cluster/data_path.ts `pieceArrived`); a piece from any other link is
// refused and logged.
import assert from "node:assert/strict";
// @ts-types="npm:@types/ws@8.18.1"
import { WebSocket } from "ws";
import { encodePiece, PEER_PATH } from "./peer_link.ts";
import { MODEL, withFleet } from "./_fleet.ts";
import { postChat } from "../../../e2e/_post_chat.ts";

/** The value of `key=` in a log line (quoted or not). */
function field(line: string, key: string): string {
  const m = new RegExp(`${key}=("(?:[^"\\\\]|\\\\.)*"|\\S+)`).exec(line);
  assert.ok(m !== null, `${key} in ${line}`);
  return m[1]!.startsWith('"') ? JSON.parse(m[1]!) : m[1]!;
}

Deno.test("issue 33, cluster: 3 instances: a peer link claiming to be an instance that does not hold the worker cannot write into a stream; the client gets the worker's answer, whole", async () => {
  await withFleet({
    workers: [{ name: "trust-w1", maxConcurrent: 4 }],
    delayMs: 100,
    env: { LOG_LEVEL: "debug", CLUSTER_SECRET: "peer-trust-secret" },
  }, async (f) => {
    const holder = f.instanceOfWorker(0);
    const [client, other] = f.instances.filter((i) => i !== holder);
    const res = await postChat(client!.url, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      max_tokens: 40,
    });
    assert.equal(res.status, 200);
    const [forwarding] = await f.workers[0]!.waitForLine(
      /.*forwarding request.*/,
    );
    const requestId = field(forwarding!, "request_id");
    const [registered] = await holder.child.waitForLine(
      /.*worker registered.*/,
    );
    const workerId = field(registered!, "worker_id");
    const [joined] = await other!.child.waitForLine(
      /.*joined the relay cluster.*/,
    );
    const otherId = field(joined!, "instance");

    // A link that holds the secret and says it is `other`, a live member.
    const url = new URL(PEER_PATH, client!.url);
    url.protocol = "ws:";
    const forger = new WebSocket(url, {
      headers: {
        authorization: "Bearer peer-trust-secret",
        "x-relay-instance": otherId,
      },
    });
    await new Promise((resolve, reject) => {
      forger.once("open", resolve);
      forger.once("error", reject);
    });
    for (let seq = 0; seq < 100; seq++) {
      forger.send(encodePiece({
        requestId,
        workerId,
        seq,
        chunk: 'data: {"forged":true}\n\n',
      }));
    }

    const text = await res.text();
    assert.doesNotMatch(text, /forged/);
    assert.match(text, /data: \[DONE\]/);
    await client!.child.waitForLine(/peer piece refused/);
    forger.close();
  });
});
