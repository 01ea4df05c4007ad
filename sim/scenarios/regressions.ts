// Every bug the simulator found, as a named scenario with a pinned seed and a
// one-line postmortem (sled's tests/00_regression.rs). Tests replay each one.
import type { Scenario } from "../scenario.ts";

export type Regression = {
  scenario: Scenario;
  seed: bigint;
  postmortem: string;
};

export const REGRESSIONS: Regression[] = [];
