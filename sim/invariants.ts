// The simulator's checker, as its callers use it: the named invariants
// (invariants/catalog.ts, one file each in invariants/) and the observer that
// feeds its model of the relay and checks them after every step
// (observer/observer.ts, observer/model.ts).
export {
  type InvariantName,
  INVARIANTS,
  type Violation,
} from "./invariants/catalog.ts";
export type { ObserverConfig, SchedStats } from "./observer/model.ts";
export { Observer } from "./observer/observer.ts";
