// The cluster runtime on an in-memory engine: replicas, checkpoints and the
// divergence guard, without processes or Redis.
import assert from "node:assert/strict";
import { initialState, makeConfig } from "../../../core/mod.ts";
import { stateDigest } from "../../../core/cluster/mod.ts";
import { waitUntil } from "../../procs.ts";
import { memoryEngine } from "./_memory_engine.ts";
import { type ClusterRuntime, startClusterRuntime } from "./runtime.ts";

const coreConfig = makeConfig({});

async function instance(
  engine: ReturnType<typeof memoryEngine>,
  lines: string[],
): Promise<ClusterRuntime> {
  return await startClusterRuntime({
    engine,
    state: initialState(coreConfig, 0),
    coreConfig,
    clients: new Map(),
    sockets: new Map(),
    runEffect: () => {},
    log: (_level, message) => lines.push(message),
    snapshotEveryMs: 40,
  });
}

Deno.test("cluster runtime: replicas agree; a replica that diverges from the cluster's checkpoint digest rejoins from its snapshot", async () => {
  const engine = memoryEngine();
  const linesA: string[] = [];
  const linesB: string[] = [];
  const a = await instance(engine, linesA);
  const b = await instance(engine, linesB);
  const tick = setInterval(() => {
    for (const r of [a, b]) r.submit({ kind: "tick", atMs: 0, unixMs: 0 });
  }, 10);
  try {
    await waitUntil(
      "both replicas to apply the same entries",
      () =>
        a.cluster.lastMs === b.cluster.lastMs && a.cluster.lastMs > 0 &&
        stateDigest(a.cluster) === stateDigest(b.cluster),
      5_000,
    );
    // Corrupt the replica that does not write the checkpoints.
    const [writer, other, otherLines] = a.instanceId < b.instanceId
      ? [a, b, linesB]
      : [b, a, linesA];
    const oldId = other.instanceId;
    other.state.dispatchSeq += 7;
    await waitUntil(
      "the corrupted replica to notice",
      () =>
        otherLines.includes(
          "this replica diverged from the cluster: rejoining",
        ),
      5_000,
    );
    await waitUntil(
      "it to rejoin and agree again",
      () =>
        other.up && other.cluster.lastMs === writer.cluster.lastMs &&
        stateDigest(other.cluster) === stateDigest(writer.cluster) &&
        other.state.dispatchSeq === writer.state.dispatchSeq,
      5_000,
    );
    assert.notEqual(other.instanceId, oldId, "it rejoined under a new id");
  } finally {
    clearInterval(tick);
    await a.close();
    await b.close();
  }
});

Deno.test("cluster runtime: an instance built from another reducer version refuses to join", async () => {
  const engine = memoryEngine();
  await engine.setIfAbsent(
    "meta",
    JSON.stringify({ reducer: "0.0-older", config: "whatever" }),
  );
  await assert.rejects(
    instance(engine, []),
    (e: Error) =>
      e.name === "ClusterJoinError" && /reducer version/.test(e.message),
  );
  assert.equal(engine.entries.length, 0, "it appended nothing");
});
