// Test-only: a ClusterEngine in memory, for runtime tests without Redis. Entry
// ids are `ms-seq` from the wall clock, as Redis makes them.
import type { ClusterEngine, LogEntry } from "./engine.ts";
import { compareIds } from "./runtime.ts";

export type MemoryEngine = ClusterEngine & { entries: LogEntry[] };

export function memoryEngine(): MemoryEngine {
  const entries: LogEntry[] = [];
  const kv = new Map<string, string>();
  const records = new Map<string, string>();
  const waiters = new Set<() => void>();
  let lastMs = 0;
  let seq = 0;
  let snap: { id: string; epoch: string; data: string } | null = null;
  const after = (id: string) => entries.filter((e) => compareIds(e.id, id) > 0);
  return {
    entries,
    append(data) {
      const ms = Math.max(Date.now(), lastMs);
      seq = ms === lastMs ? seq + 1 : 0;
      lastMs = ms;
      entries.push({ id: `${ms}-${seq}`, ms, data });
      for (const w of [...waiters]) w();
      return Promise.resolve();
    },
    holds: (id) => Promise.resolve(entries.some((e) => e.id === id)),
    async read(afterId, blockMs, count) {
      let out = after(afterId);
      if (out.length === 0 && blockMs > 0) {
        await new Promise<void>((resolve) => {
          const done = () => {
            waiters.delete(done);
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(done, blockMs);
          waiters.add(done);
        });
        out = after(afterId);
      }
      return out.slice(0, count);
    },
    epoch() {
      if (!kv.has("epoch")) kv.set("epoch", crypto.randomUUID());
      return Promise.resolve(kv.get("epoch")!);
    },
    setIfAbsent(key, value) {
      if (!kv.has(key)) kv.set(key, value);
      return Promise.resolve(kv.get(key)!);
    },
    getSnapshot: () => Promise.resolve(snap),
    putSnapshot(s) {
      snap = s;
      return Promise.resolve();
    },
    claimOnce(key) {
      if (kv.has(`once:${key}`)) return Promise.resolve(false);
      kv.set(`once:${key}`, "1");
      return Promise.resolve(true);
    },
    recordsAll: () => Promise.resolve(Object.fromEntries(records)),
    recordSet(id, value) {
      records.set(id, value);
      return Promise.resolve();
    },
    recordDelete(id) {
      records.delete(id);
      return Promise.resolve();
    },
    onStatus() {},
    close: () => Promise.resolve(),
  };
}
