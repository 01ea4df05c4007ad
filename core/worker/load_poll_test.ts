import assert from "node:assert/strict";
import { MODEL_LOAD_MS_MAX } from "../config.ts";
import {
  LOAD_POLL_MS,
  routerLoadPoll,
  spec004LoadPoll,
  UNLOADED_GIVE_UP_MS,
} from "./mod.ts";

Deno.test("a load in progress is polled every 250 ms", () => {
  assert.equal(LOAD_POLL_MS, 250);
});

Deno.test("a router that still lists the model as unloaded after 5 s failed the load; before that it is still starting", () => {
  assert.equal(UNLOADED_GIVE_UP_MS, 5_000);
  assert.deepEqual(routerLoadPoll("big", "unloaded", 250), {
    kind: "running",
  });
  assert.deepEqual(routerLoadPoll("big", "unloaded", 5_000), {
    kind: "running",
  });
  assert.deepEqual(routerLoadPoll("big", "unloaded", 5_001), {
    kind: "failed",
    error: 'llama-server reports model "big" as unloaded',
  });
  assert.deepEqual(routerLoadPoll("big", "loading", 60_000), {
    kind: "running",
  });
});

Deno.test("a router's loaded or failed status ends the load at once", () => {
  assert.deepEqual(routerLoadPoll("big", "loaded", 0), { kind: "loaded" });
  assert.deepEqual(routerLoadPoll("big", "failed", 0), {
    kind: "failed",
    error: 'llama-server reports model "big" as failed',
  });
});

Deno.test("a spec 004 load task ends on completed or failed, with the runner's error", () => {
  assert.deepEqual(spec004LoadPoll("completed", undefined, 0), {
    kind: "loaded",
  });
  assert.deepEqual(spec004LoadPoll("failed", "out of memory", 0), {
    kind: "failed",
    error: "out of memory",
  });
  assert.deepEqual(spec004LoadPoll("failed", undefined, 0), {
    kind: "failed",
    error: "the runner reported a failure",
  });
  assert.deepEqual(spec004LoadPoll("loading", undefined, 1_000), {
    kind: "running",
  });
});

Deno.test("a load still running after MODEL_LOAD_MS_MAX is given up, on either backend", () => {
  const late = {
    kind: "failed",
    error: "the load did not finish in time",
  };
  assert.deepEqual(
    spec004LoadPoll("loading", undefined, MODEL_LOAD_MS_MAX),
    late,
  );
  assert.deepEqual(routerLoadPoll("big", "loading", MODEL_LOAD_MS_MAX), late);
  assert.deepEqual(
    routerLoadPoll("big", "loading", MODEL_LOAD_MS_MAX - 1),
    { kind: "running" },
  );
});
