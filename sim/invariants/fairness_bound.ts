// fairnessBound (spec 004): while a tenant has a dispatchable request waiting in
// a class, no other tenant of that class is served twice before it (at most one
// dispatch per other tenant: round-robin over the class's tenants).
import type { Scheduled } from "./scheduled.ts";

export function noTenantServedTwiceAhead(
  { m, r, check, tenantsReady }: Scheduled,
): void {
  const c = r.priority;
  for (const [tenant, qid] of tenantsReady) {
    if (tenant === r.tenant) continue;
    const key = `${c}|${tenant}`;
    let ahead = m.servedAhead.get(key);
    if (ahead === undefined) {
      ahead = new Set();
      m.servedAhead.set(key, ahead);
    }
    check(
      !ahead.has(r.tenant),
      "fairnessBound",
      () =>
        `${r.id}: tenant ${r.tenant} served again in class ${c} while tenant ${tenant} has waited with dispatchable ${qid} since others were served: ${
          [...ahead!].join(",")
        } (${tenantsReady.size - 1} other tenant(s) ready now)`,
    );
    ahead.add(r.tenant);
    if (ahead.size > m.sched.maxOthersAhead) {
      m.sched.maxOthersAhead = ahead.size;
    }
  }
  // Served: its own wait starts over.
  m.servedAhead.delete(`${c}|${r.tenant}`);
}
