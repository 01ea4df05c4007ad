// The models simulator's named scenarios (issue 30). Load times are seconds,
// as on a GPU box; service times a second or a few.
import type { ModelsScenario } from "./models_world.ts";

const times = {
  loadMs: [3_000, 8_000] as const,
  serviceMs: [500, 3_000] as const,
  firstByteMs: [50, 300] as const,
  netMs: [1, 20] as const,
};

/** Two boxes that both list A and B, room for one model each (issue 30's measurement). */
const twoBoxesOverlapping: ModelsScenario = {
  name: "two_boxes_overlapping",
  boxes: [
    {
      name: "box1",
      models: ["A", "B"],
      maxConcurrent: 4,
      room: 1,
      preloaded: [],
    },
    {
      name: "box2",
      models: ["A", "B"],
      maxConcurrent: 4,
      room: 1,
      preloaded: [],
    },
  ],
  arrivals: [
    { kind: "sequential", count: 20, models: ["A", "B"], gapMs: [0, 200] },
    {
      kind: "random",
      count: 200,
      fromMs: 60_000,
      toMs: 180_000,
      models: ["A", "B"],
    },
  ],
  ...times,
};

/** Clients that give up: one in ten leaves 0.5–20 s after arriving (while queued, loading or streaming). */
const impatient = { abortPct: 10, abortAfterMs: [500, 20_000] as const };

/** Three boxes, six models, room for two each: more models than room. */
const moreModelsThanRoom: ModelsScenario = {
  name: "more_models_than_room",
  boxes: ["box1", "box2", "box3"].map((name) => ({
    name,
    models: ["A", "B", "C", "D", "E", "F"],
    maxConcurrent: 4,
    room: 2,
    preloaded: [],
  })),
  arrivals: [
    {
      kind: "random",
      count: 600,
      fromMs: 0,
      toMs: 300_000,
      models: ["A", "B", "C", "D", "E", "F"],
    },
  ],
  ...times,
  ...impatient,
};

/** Bursts of 20 for one model at a time, over two boxes with room for one. */
const bursts: ModelsScenario = {
  name: "bursts",
  boxes: [
    {
      name: "box1",
      models: ["A", "B", "C"],
      maxConcurrent: 4,
      room: 1,
      preloaded: ["A"],
    },
    {
      name: "box2",
      models: ["A", "B", "C"],
      maxConcurrent: 4,
      room: 1,
      preloaded: ["B"],
    },
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
    {
      name: "box1",
      models: ["A", "B", "C"],
      maxConcurrent: 2,
      room: 1,
      preloaded: ["A"],
    },
    {
      name: "box2",
      models: ["A", "B", "C"],
      maxConcurrent: 2,
      room: 1,
      preloaded: ["B"],
    },
  ],
  arrivals: [
    {
      kind: "random",
      count: 300,
      fromMs: 0,
      toMs: 200_000,
      models: ["A", "B"],
    },
    { kind: "random", count: 6, fromMs: 10_000, toMs: 180_000, models: ["C"] },
  ],
  ...times,
  ...impatient,
};

/** Each box dies halfway through its first load and comes back empty 20 s later. */
const workerDiesMidLoad: ModelsScenario = {
  name: "worker_dies_mid_load",
  boxes: ["box1", "box2"].map((name) => ({
    name,
    models: ["A", "B"],
    maxConcurrent: 4,
    room: 1,
    preloaded: [],
    dieMidLoadAfterMs: 0,
    backAfterMs: 20_000,
  })),
  arrivals: [
    {
      kind: "random",
      count: 200,
      fromMs: 1_000,
      toMs: 120_000,
      models: ["A", "B"],
    },
  ],
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
    {
      name: "box1",
      models: ["A", "B"],
      maxConcurrent: 4,
      room: 2,
      preloaded: ["A", "B"],
    },
    { name: "box2", models: ["A"], maxConcurrent: 4, room: 1, preloaded: [] },
  ],
  arrivals: [
    { kind: "random", count: 60, fromMs: 0, toMs: 240_000, models: ["B"] },
    { kind: "random", count: 60, fromMs: 0, toMs: 240_000, models: ["A"] },
  ],
  ...times,
  serviceMsByModel: { B: [20_000, 40_000] },
};

export const MODELS_SCENARIOS: ReadonlyMap<string, ModelsScenario> = new Map(
  [
    twoBoxesOverlapping,
    moreModelsThanRoom,
    bursts,
    modelNobodyLoaded,
    workerDiesMidLoad,
    longRequestsHogTheHolder,
  ].map((s) => [s.name, s]),
);
