// drainingModelsStayRoutable (C28, issue 14.1): a worker draining itself
// (drain-v1) keeps its models known: requests for them queue, never 404, until
// it disconnects.
import type { Model, MReq } from "../model/model.ts";
import type { Check } from "./catalog.ts";

/**
 * A new request answered model_not_found: no registered worker may hold its
 * model and take its path (issue 25: a worker's endpoint_prefixes may not).
 */
export function notFoundOnlyWithoutHolder(
  m: Model,
  check: Check,
  nr: MReq,
): void {
  const holder = [...m.workers.values()].find((x) =>
    x.registered && (x.acked.has(nr.model) || x.wildcard) &&
    m.accepts(x, { ...nr, binary: false })
  );
  check(
    holder === undefined,
    "drainingModelsStayRoutable",
    () =>
      `${nr.id} for "${nr.model}" answered 404 while ${holder?.conn}${
        holder?.selfDraining === true ? " (draining itself)" : ""
      } still holds the model`,
  );
}
