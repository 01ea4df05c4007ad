// The models simulator's named scenarios (issue 30). Load times are seconds,
// as on a GPU box; service times a second or a few.
import type { Arrivals, BoxSpec, ModelsScenario } from "./world.ts";
import { Prng } from "../prng.ts";

const times = {
  loadMs: [3_000, 8_000] as const,
  serviceMs: [500, 3_000] as const,
  firstByteMs: [50, 300] as const,
  netMs: [1, 20] as const,
};

/** A box of 4 slots with room for one model, none loaded, but for what differs. */
function box(
  name: string,
  models: string[],
  differs: Partial<BoxSpec> = {},
): BoxSpec {
  return { name, models, maxConcurrent: 4, room: 1, preloaded: [], ...differs };
}

/** `count` requests for `models` at random times in [fromMs, toMs]. */
function random(
  count: number,
  fromMs: number,
  toMs: number,
  models: string[],
): Arrivals {
  return { kind: "random", count, fromMs, toMs, models };
}

/** Two boxes that both list A and B, room for one model each (issue 30's measurement). */
const twoBoxesOverlapping: ModelsScenario = {
  name: "two_boxes_overlapping",
  boxes: [box("box1", ["A", "B"]), box("box2", ["A", "B"])],
  arrivals: [
    { kind: "sequential", count: 20, models: ["A", "B"], gapMs: [0, 200] },
    random(200, 60_000, 180_000, ["A", "B"]),
  ],
  ...times,
};

/** Clients that give up: one in ten leaves 0.5–20 s after arriving (while queued, loading or streaming). */
const impatient = { abortPct: 10, abortAfterMs: [500, 20_000] as const };

/** Three boxes, six models, room for two each: more models than room. */
const moreModelsThanRoom: ModelsScenario = {
  name: "more_models_than_room",
  boxes: ["box1", "box2", "box3"].map((name) =>
    box(name, ["A", "B", "C", "D", "E", "F"], { room: 2 })
  ),
  arrivals: [random(600, 0, 300_000, ["A", "B", "C", "D", "E", "F"])],
  ...times,
  ...impatient,
};

/** Bursts of 20 for one model at a time, over two boxes with room for one. */
const bursts: ModelsScenario = {
  name: "bursts",
  boxes: [
    box("box1", ["A", "B", "C"], { preloaded: ["A"] }),
    box("box2", ["A", "B", "C"], { preloaded: ["B"] }),
  ],
  arrivals: [
    {
      kind: "bursts",
      bursts: 12,
      size: 20,
      everyMs: 15_000,
      models: ["A", "B", "C"],
    },
  ],
  ...times,
  ...impatient,
};

/** Boxes preloaded with A and B, full; now and then a request for C, which nobody has loaded. */
const modelNobodyLoaded: ModelsScenario = {
  name: "model_nobody_loaded",
  boxes: [
    box("box1", ["A", "B", "C"], { maxConcurrent: 2, preloaded: ["A"] }),
    box("box2", ["A", "B", "C"], { maxConcurrent: 2, preloaded: ["B"] }),
  ],
  arrivals: [
    random(300, 0, 200_000, ["A", "B"]),
    random(6, 10_000, 180_000, ["C"]),
  ],
  ...times,
  ...impatient,
};

/** Each box dies halfway through its first load and comes back empty 20 s later. */
const workerDiesMidLoad: ModelsScenario = {
  name: "worker_dies_mid_load",
  boxes: ["box1", "box2"].map((name) =>
    box(name, ["A", "B"], { dieMidLoadAfterMs: 0, backAfterMs: 20_000 })
  ),
  arrivals: [random(200, 1_000, 120_000, ["A", "B"])],
  ...times,
  ...impatient,
};

/**
 * Long requests of B fill box1, which holds A too: A's requests, short, would
 * wait behind them on the estimate of A's own service time; the bound on
 * waiting (ski rental) loads A on box2 instead once one waited a load's time.
 */
const longRequestsHogTheHolder: ModelsScenario = {
  name: "long_requests_hog_the_holder",
  boxes: [
    box("box1", ["A", "B"], { room: 2, preloaded: ["A", "B"] }),
    box("box2", ["A"]),
  ],
  arrivals: [
    random(60, 0, 240_000, ["B"]),
    random(60, 0, 240_000, ["A"]),
  ],
  ...times,
  serviceMsByModel: { B: [20_000, 40_000] },
};

/** A rolling restart: each box is drained in turn and comes back 10 s later. */
const rollingDrain: ModelsScenario = {
  name: "rolling_drain",
  boxes: [
    box("box1", ["A", "B"], {
      preloaded: ["A"],
      drainAtMs: 30_000,
      backAfterMs: 10_000,
    }),
    box("box2", ["A", "B"], {
      preloaded: ["B"],
      drainAtMs: 80_000,
      backAfterMs: 10_000,
    }),
  ],
  arrivals: [random(200, 0, 150_000, ["A", "B"])],
  ...times,
  ...impatient,
};

/**
 * Each box holds one model and its backend refuses one request in ten before
 * any byte (`backend_unavailable`, as a real router's keep-alive "socket hang
 * up" under load); the other box lists the model but does not hold it. Found
 * by e2e/models_fleet_test.ts with two real routers: a refused request waited
 * for the box it avoided and never went anywhere. Clients wait as long as it
 * takes and an unmeasured load is assumed to take 10 minutes (a large model
 * from a slow disk), so such a request shows as one that never ends
 * (`everyRequestEnds`), not as a 504 among others or a load elsewhere.
 */
const hotWorkerRefuses: ModelsScenario = {
  name: "hot_worker_refuses",
  boxes: [
    box("box1", ["A", "B"], { preloaded: ["A"], refusePct: 10 }),
    box("box2", ["A", "B"], { preloaded: ["B"], refusePct: 10 }),
  ],
  arrivals: [random(200, 0, 120_000, ["A", "B"])],
  ...times,
  config: {
    modelLoadMsAssumed: 600_000,
    queueTimeoutMs: 900_000,
    requestTimeoutMs: 900_000,
  },
};

export const MODELS_SCENARIOS: ReadonlyMap<string, ModelsScenario> = new Map(
  [
    twoBoxesOverlapping,
    moreModelsThanRoom,
    bursts,
    modelNobodyLoaded,
    workerDiesMidLoad,
    longRequestsHogTheHolder,
    rollingDrain,
    hotWorkerRefuses,
  ].map((s) => [s.name, s]),
);

const ALL_MODELS = ["A", "B", "C", "D", "E", "F"];

/**
 * A random fleet from `seed` (the sweep, `--random N`): 1–4 boxes listing
 * some of 1–6 models, room 1–3, some preloaded, some dying mid-load,
 * drained or refusing requests, random arrivals, impatient clients, any
 * drain bound.
 */
export function randomScenario(seed: bigint): ModelsScenario {
  const p = Prng.fromSeed(seed * 7919n + 13n);
  // Refusals draw from their own stream, so the fleets drawn before they
  // were added stay the same.
  const faults = Prng.fromSeed(seed * 7919n + 29n);
  const models = ALL_MODELS.slice(0, p.int(1, 6));
  const boxes = Array.from({ length: p.int(1, 4) }, (_, i) => {
    const listed = models.filter(() => p.chance(3, 4));
    if (listed.length === 0) listed.push(models[0]!);
    const room = p.int(1, 3);
    return {
      name: `box${i + 1}`,
      models: listed,
      maxConcurrent: p.int(1, 4),
      room,
      preloaded: listed.filter(() => p.chance(1, 3)).slice(0, room),
      ...(p.chance(1, 4)
        ? {
          dieMidLoadAfterMs: p.int(0, 60_000),
          backAfterMs: p.int(1_000, 30_000),
        }
        : {}),
      ...(p.chance(1, 4)
        ? { drainAtMs: p.int(0, 100_000), backAfterMs: p.int(1_000, 30_000) }
        : {}),
      ...(faults.chance(1, 4) ? { refusePct: faults.int(1, 30) } : {}),
    };
  });
  return {
    name: `random_${seed}`,
    boxes,
    arrivals: [{
      kind: "random",
      count: p.int(10, 150),
      fromMs: 0,
      toMs: p.int(10_000, 150_000),
      models,
    }],
    loadMs: [p.int(500, 3_000), p.int(3_000, 10_000)],
    serviceMs: [p.int(100, 1_000), p.int(1_000, 5_000)],
    firstByteMs: [10, 300],
    netMs: [1, p.int(1, 50)],
    ...(p.chance(1, 2)
      ? { abortPct: p.int(1, 30), abortAfterMs: [100, 20_000] as const }
      : {}),
    config: { modelDrainMax: p.int(1, 10) },
  };
}
