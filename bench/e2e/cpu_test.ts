import assert from "node:assert/strict";
import { cpuFigure, type CpuProcs, parseStat, rolesOn } from "./cpu.ts";

// A real line from this machine, with a command name holding a space and ')'.
const LINE =
  "4242 (deno run) x) S 4100 4242 4100 0 -1 4194560 9626 0 0 0 731 129 0 0 20 0 9 0 1234 1000000 5000 18446744073709551615 1 1 0 0 0 0 0 4096 1088 0 0 0 17 1 0 0 0 0 0";

Deno.test("parseStat counts fields after the last ')' (utime 14 + stime 15)", () => {
  assert.deepEqual(parseStat(LINE), { pid: 4242, ppid: 4100, ticks: 860 });
});

Deno.test("parseStat rejects a line that is not /proc/<pid>/stat", () => {
  assert.throws(() => parseStat("no parenthesis here"));
  assert.throws(() => parseStat("12 (x) S a b c"));
});

const PROCS: CpuProcs = {
  backend: [1],
  server: [2, 3],
  worker: [4],
  nginx: [5, 6, 7],
  loadgen: [8],
};

Deno.test("cpuFigure divides the path's ticks by its units and leaves other roles out", () => {
  const f = cpuFigure(
    "nginx",
    "request",
    {
      units: 1000,
      rounds: 2,
      ticks: { backend: 10, server: 3, worker: 4, nginx: 5, loadgen: 20 },
    },
    PROCS,
    100,
  );
  // 10 ticks at 100 Hz = 100 ms over 1000 requests = 100 µs each.
  assert.deepEqual(f.usPerUnit, {
    backend: 100,
    server: null,
    worker: null,
    nginx: 50,
    loadgen: 200,
  });
  assert.equal(f.totalUsPerUnit, 350);
  // Raw ticks stay for every role: idle cost of the processes off the path.
  assert.equal(f.ticks.server, 3);
});

Deno.test("cpuFigure gives null for a role without a process (a real backend)", () => {
  const f = cpuFigure(
    "direct",
    "chunk",
    {
      units: 100,
      rounds: 1,
      ticks: { backend: 0, server: 0, worker: 0, nginx: 0, loadgen: 1 },
    },
    { ...PROCS, backend: [] },
    100,
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
