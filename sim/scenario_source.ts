// A scenario as TypeScript built from the builders of scenario.ts (swept,
// sweptWorker, client, load, lifecycle, backendPlan, operators) with only what
// differs from their defaults, so a shrunk failure pastes into
// sim/scenarios/regressions.ts as a few readable lines instead of expanded
// JSON. The baseline is the sweep's floor (SWEEP_CONFIG, SWEEP_WORKER), the
// one sim/arbitrary.ts draws from and fast-check shrinks to (issue 34): a
// shrunk scenario names only what did not shrink. Evaluated, the text gives
// back the scenario and its effective configuration (the same run, the same
// trace hash).
import {
  client,
  type ClientSpec,
  load,
  type LoadSpec,
  type OperatorSpec,
  type Scenario,
  scenario,
  SIM_CONFIG_DEFAULTS,
  SWEEP_CONFIG,
  sweptBackend,
  sweptLifecycle,
  sweptOperators,
  sweptWorker,
  type WorkerSpec,
} from "./scenario.ts";

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (
    typeof a !== "object" || typeof b !== "object" || a === null || b === null
  ) {
    return false;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length &&
    ka.every((k) =>
      Object.hasOwn(b, k) &&
      same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])
    );
}

/** A value as a TypeScript literal on one line; `fields` prints some keys its own way. */
function literal(
  v: unknown,
  fields: Record<string, (x: unknown) => string> = {},
): string {
  if (v === undefined) return "undefined";
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x) => literal(x)).join(", ")}]`;
  const entries = Object.entries(v).map(([k, x]) =>
    `${IDENTIFIER.test(k) ? k : JSON.stringify(k)}: ${
      fields[k]?.(x) ?? literal(x)
    }`
  );
  return entries.length === 0 ? "{}" : `{ ${entries.join(", ")} }`;
}

/** The keys of `v` whose value is not the builder's default. */
function overrides<T extends object>(v: T, defaults: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, x] of Object.entries(v)) {
    if (!same(x, (defaults as Record<string, unknown>)[k])) {
      (out as Record<string, unknown>)[k] = x;
    }
  }
  return out;
}

/** `name(args..., { overrides })`, or the plain literal if the builder would add a key `v` lacks. */
function call<T extends object>(
  name: string,
  v: T,
  defaults: T,
  args: string[] = [],
  fields: Record<string, (x: unknown) => string> = {},
): string {
  if (!Object.keys(defaults).every((k) => Object.hasOwn(v, k))) {
    return literal(v, fields);
  }
  const o = overrides(v, defaults);
  const parts = Object.keys(o).length === 0
    ? args
    : [...args, literal(o, fields)];
  return `${name}(${parts.join(", ")})`;
}

function workerCall(w: WorkerSpec): string {
  const base = sweptWorker(w.name, w.models);
  return call("sweptWorker", w, base, [literal(w.name), literal(w.models)], {
    lifecycle: (x) =>
      call(
        "sweptLifecycle",
        x as WorkerSpec["lifecycle"] & object,
        sweptLifecycle(),
      ),
    backend: (x) =>
      call("sweptBackend", x as WorkerSpec["backend"] & object, sweptBackend()),
  });
}

function clientCall(c: ClientSpec): string {
  return call("client", c, client(c.atMs, c.model), [
    literal(c.atMs),
    literal(c.model),
  ]);
}

function loadCall(l: LoadSpec): string {
  return call("load", l, load());
}

function operatorsCall(o: OperatorSpec): string {
  return call("sweptOperators", o, sweptOperators());
}

function list<T>(items: readonly T[], each: (x: T) => string): string {
  return items.length === 0
    ? "[]"
    : `[\n${items.map((x) => `    ${each(x)},`).join("\n")}\n  ]`;
}

/** The configuration keys whose effective value differs from the sweep's floor. */
function sweepOverrides(c: Scenario["config"]): Scenario["config"] {
  return overrides(
    { ...SIM_CONFIG_DEFAULTS, ...c },
    { ...SIM_CONFIG_DEFAULTS, ...SWEEP_CONFIG },
  );
}

/** `const <binding>: Scenario = swept({ name, ... });`: what differs from the sweep's floor, one builder call a line. */
export function scenarioSource(s: Scenario, binding: string): string {
  const fields: Record<string, (x: unknown) => string> = {
    workers: (x) => list(x as WorkerSpec[], workerCall),
    clients: (x) => list(x as ClientSpec[], clientCall),
    load: (x) => list(x as LoadSpec[], loadCall),
    operators: (x) => list(x as OperatorSpec[], operatorsCall),
  };
  const o = overrides(
    { ...s, config: sweepOverrides(s.config) },
    scenario({ name: s.name }),
  );
  const lines = [`  name: ${literal(s.name)},`].concat(
    Object.entries(o).map(([k, x]) =>
      `  ${k}: ${fields[k]?.(x) ?? literal(x)},`
    ),
  );
  return [`const ${binding}: Scenario = swept({`, ...lines, "});"].join(
    "\n",
  );
}
