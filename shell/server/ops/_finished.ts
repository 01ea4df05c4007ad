// A finished request as the usage ledger and the metrics receive it (the
// core's requestFinished effect): a completed chat answer with its counts.
// Tests and the ledger probe change only the fields they look at.
import type { Finished } from "./usage_ledger.ts";

export function finished(over: Partial<Finished> = {}): Finished {
  return {
    kind: "requestFinished",
    requestId: "r1",
    route: "/v1/chat/completions",
    model: "m",
    tenant: "acme",
    outcome: "completed",
    status: 200,
    durationMs: 12.4,
    queueWaitMs: 1,
    firstByteMs: 3,
    requeues: 0,
    cacheReport: null,
    keyId: "key_1",
    keyName: "ci",
    modelAsked: "m",
    modelServed: "m",
    workerName: "gpu-a",
    usage: { prompt: 10, completion: 5, cached: null, estimated: false },
    ...over,
  };
}
