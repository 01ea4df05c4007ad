// Issue 33: how long the usage ledger holds the event loop while another
// connection holds the database's write lock, and how many records survive.
// A record every 10 ms for 5 s with the lock held, then the lock let go; a
// 5 ms interval timer measures the longest stall of the event loop.
// `deno run --allow-read --allow-write bench/ledger_lock_probe.ts`
import { DatabaseSync } from "node:sqlite";
import { openRelayDatabase } from "../shell/server/ops/api_keys.ts";
import {
  type Finished,
  openUsageLedger,
} from "../shell/server/ops/usage_ledger.ts";

function finishedFixture(requestId = "req_first"): Finished {
  return {
    kind: "requestFinished",
    requestId,
    route: "/v1/chat/completions",
    model: "m",
    tenant: "team-a",
    outcome: "completed",
    status: 200,
    durationMs: 120,
    queueWaitMs: 1,
    firstByteMs: 10,
    requeues: 0,
    cacheReport: null,
    keyId: null,
    keyName: null,
    modelAsked: "m",
    modelServed: "m",
    workerName: "gpu-1",
    usage: { prompt: 10, completion: 20, cached: null, estimated: false },
  };
}

const dir = Deno.makeTempDirSync({ prefix: "ledger-lock-probe-" });
const path = `${dir}/probe.db`;
const db = openRelayDatabase(path);
const errors: string[] = [];
const ledger = openUsageLedger(db, 30, (e) => errors.push(String(e)));
ledger.record(finishedFixture(), Date.now());
ledger.flush(); // the table and the write-ahead log exist before the lock

const other = new DatabaseSync(path);
other.exec("BEGIN IMMEDIATE");

let last = performance.now();
let worst = 0;
const lag = setInterval(() => {
  const now = performance.now();
  worst = Math.max(worst, now - last);
  last = now;
}, 5);
let sent = 0;
const sender = setInterval(() => {
  ledger.record(finishedFixture(`req_${sent++}`), Date.now());
}, 10);
await new Promise((r) => setTimeout(r, 5000));
clearInterval(sender);
const lockedWorst = worst;
other.exec("COMMIT");
other.close();
await new Promise((r) => setTimeout(r, 2500));
clearInterval(lag);
ledger.flush();
const written = Number(
  (db.prepare("SELECT COUNT(*) AS n FROM usage_records").get() ?? { n: 0 }).n,
) - 1;
console.log(
  JSON.stringify({
    records_sent: sent,
    records_written: written,
    event_loop_worst_stall_ms_while_locked: Math.round(lockedWorst),
    errors_logged: errors.length,
    first_error: errors[0] ?? null,
  }),
);
ledger.close();
db.close();
Deno.removeSync(dir, { recursive: true });
