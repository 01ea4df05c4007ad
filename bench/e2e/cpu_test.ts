import assert from "node:assert/strict";
import {
  cpuFigure,
  type CpuProcs,
  parseCpuNs,
  parseStatTicks,
  readCpuNs,
  readTicks,
  rolesOn,
  zeroCpu,
} from "./cpu.ts";

Deno.test("parseCpuNs reads one 'pid ns' line per process", () => {
  assert.deepEqual(
    parseCpuNs("4242 731000123\n17 0\n"),
    new Map([[4242, 731000123], [17, 0]]),
  );
  assert.throws(() => parseCpuNs("4242 lots"));
});

Deno.test("readCpuNs sums this process's threads and grows with work done", () => {
  const me = Deno.pid;
  const before = readCpuNs([me]).get(me);
  assert.ok(before !== undefined && before > 0);
  // Work until the counter shows 10 ms more CPU, for at most 10 s of wall
  // time: on a loaded box this process gets a small share of a core, so a
  // fixed wall-clock spin (30 ms, once) measured as little as 7.9 ms.
  let x = 0;
  let after = before;
  const until = performance.now() + 10_000;
  while (after - before < 10_000_000 && performance.now() < until) {
    for (let i = 0; i < 100_000; i++) x += Math.sqrt(x + 1);
    after = readCpuNs([me]).get(me)!;
  }
  assert.ok(x > 0);
  assert.ok(after - before >= 10_000_000, `${after - before} ns`);
  // A pid that does not exist prints nothing (snapshot() then says it is gone).
  assert.equal(readCpuNs([0x3fffffff]).size, 0);
});

const PROCS: CpuProcs = {
  backend: [1],
  server: [2, 3],
  worker: [4],
  nginx: [5, 6, 7],
  naive: [9, 10],
  base: [11, 12],
  loadgen: [8],
};

Deno.test("cpuFigure divides the path's CPU by its units and leaves other roles out", () => {
  const f = cpuFigure(
    "nginx",
    "request",
    {
      units: 1000,
      rounds: 2,
      cpuNs: {
        backend: 100e6,
        server: 30e6,
        worker: 40e6,
        nginx: 50e6,
        naive: 70e6,
        base: 80e6,
        loadgen: 200e6,
      },
    },
    PROCS,
  );
  // 100 ms over 1000 requests = 100 µs each.
  assert.deepEqual(f.usPerUnit, {
    backend: 100,
    server: null,
    worker: null,
    nginx: 50,
    naive: null,
    base: null,
    loadgen: 200,
  });
  assert.equal(f.totalUsPerUnit, 350);
  // Raw sums stay for every role: idle cost of the processes off the path.
  assert.equal(f.cpuNs.server, 30e6);
});

Deno.test("cpuFigure gives null for a role without a process (a real backend)", () => {
  const f = cpuFigure(
    "direct",
    "chunk",
    {
      units: 100,
      rounds: 1,
      cpuNs: { ...zeroCpu(), loadgen: 10e6 },
    },
    { ...PROCS, backend: [] },
  );
  assert.equal(f.usPerUnit.backend, null);
  assert.equal(f.totalUsPerUnit, 100);
});

Deno.test("rolesOn: relay crosses server and worker, nginx crosses nginx, direct neither", () => {
  assert.deepEqual(rolesOn("relay"), [
    "backend",
    "server",
    "worker",
    "loadgen",
  ]);
  assert.deepEqual(rolesOn("direct"), ["backend", "loadgen"]);
  assert.deepEqual(rolesOn("nginx"), ["backend", "nginx", "loadgen"]);
});

Deno.test("parseStatTicks reads utime and stime after a command name with spaces and parentheses", () => {
  const line =
    "4242 (deno (main) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 731 88 0 0 20 0 9 0 5555 1000000 2000 18446744073709551615";
  assert.deepEqual(parseStatTicks(line), { user: 731, kernel: 88 });
  assert.throws(() => parseStatTicks("4242 (deno) S 1"), /not a \/proc/);
});

Deno.test("readTicks reads this process's own user and kernel ticks", () => {
  const t = readTicks([Deno.pid]).get(Deno.pid);
  assert.ok(t !== undefined);
  assert.ok(t.user >= 0 && t.kernel >= 0);
  assert.equal(readTicks([]).size, 0);
});
