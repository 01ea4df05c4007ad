// The simulator's checker, as its callers use it: the observer
// (observer.ts), which feeds its model of the relay (../model/) and checks the
// named invariants (../invariants/catalog.ts, one file each) after every step.
// The floors: model/ holds what the observer knows, invariants/ read the model,
// observer/ runs both; nothing below points back up.
export {
  type InvariantName,
  INVARIANTS,
  type Violation,
} from "../invariants/catalog.ts";
export {
  type ObserverConfig,
  observerConfigOf,
  type SchedStats,
} from "../model/model.ts";
export { Observer } from "./observer.ts";
