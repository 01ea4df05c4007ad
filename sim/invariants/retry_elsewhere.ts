// retryElsewhere (C27, issue 14.3): a request refused by a worker (scoped
// error) goes back to that worker only when no other worker serves the model;
// a worker whose backend circuit is open gets nothing.
import type { Dispatch } from "./dispatch.ts";

export function circuitLetsDispatch(
  { m, check, id, conn, w }: Dispatch,
): void {
  check(
    m.circuitLets(w),
    "retryElsewhere",
    () =>
      `${id} dispatched to ${conn} whose backend circuit is ${w.circuit.kind} (${w.assigned.size} in flight)`,
  );
}

export function notBackToRefuser({ m, check, id, conn, r, w }: Dispatch): void {
  check(
    m.mayGo(r, w),
    "retryElsewhere",
    () =>
      `${id}, refused by ${conn}, went back to it while another worker serves "${r.model}"`,
  );
}
