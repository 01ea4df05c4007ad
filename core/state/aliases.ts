// Model aliases (MODEL_ALIASES, issue 25): a request for an alias is routed as
// its target, and the backend receives the target's name. One level only: an
// alias of an alias is not followed, so a loop in the setting cannot hang.
import type { Config } from "../config.ts";

/** The model a request for `model` is routed as: its alias target, else itself. */
export function aliasTarget(config: Config, model: string): string {
  return Object.hasOwn(config.modelAliases, model)
    ? config.modelAliases[model]!
    : model;
}
