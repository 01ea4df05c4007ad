// Options read from flags, then environment, then defaults (flags win), with
// validation that names the option and what a valid value looks like.
import { parseArgs } from "node:util";

export type OptionKind = "string" | "int" | "bool" | "secret";
export type OptionSpec = {
  flag: string;
  env: string;
  kind: OptionKind;
  default: string | null;
  help: string;
  min?: number;
};
export type OptionValues = Record<string, string | null>;

export class OptionError extends Error {}

export function helpText(
  title: string,
  usage: string,
  specs: OptionSpec[],
): string {
  const rows = specs.map((s) => {
    const def = s.default === null
      ? "(required)"
      : s.default === ""
      ? "(none)"
      : s.default;
    return `  --${s.flag.padEnd(24)} ${
      s.env.padEnd(28)
    } default ${def}\n      ${s.help}`;
  });
  return `${title}\n\nUsage: ${usage}\n\nOptions (flag, environment variable, default):\n${
    rows.join("\n")
  }\n  --help                   show this help\n`;
}

/** Reads every option; throws OptionError with a one-line reason on invalid input. */
export function readOptions(
  args: string[],
  env: (name: string) => string | undefined,
  specs: OptionSpec[],
): { values: OptionValues; help: boolean } {
  const parseSpec: Record<string, { type: "string" | "boolean" }> = {
    help: { type: "boolean" },
  };
  for (const s of specs) parseSpec[s.flag] = { type: "string" };
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options: parseSpec,
      allowPositionals: false,
      strict: true,
    });
  } catch (e) {
    throw new OptionError(`${(e as Error).message} (see --help)`);
  }
  const values: OptionValues = {};
  for (const s of specs) {
    const fromFlag = parsed.values[s.flag];
    const raw = typeof fromFlag === "string"
      ? fromFlag
      : env(s.env) ?? s.default;
    values[s.flag] = raw === null ? null : validate(s, raw.trim());
  }
  return { values, help: parsed.values.help === true };
}

function validate(s: OptionSpec, raw: string): string {
  const name = `${s.env} (--${s.flag})`;
  switch (s.kind) {
    case "int": {
      if (!/^\d+$/.test(raw)) {
        throw new OptionError(`${name} must be a whole number, got "${raw}"`);
      }
      const n = Number(raw);
      if (s.min !== undefined && n < s.min) {
        throw new OptionError(`${name} must be at least ${s.min}, got ${n}`);
      }
      return raw;
    }
    case "bool":
      if (
        !["true", "false", "1", "0", "yes", "no"].includes(raw.toLowerCase())
      ) {
        throw new OptionError(`${name} must be true or false, got "${raw}"`);
      }
      return ["true", "1", "yes"].includes(raw.toLowerCase())
        ? "true"
        : "false";
    case "string":
    case "secret":
      return raw;
  }
}

export function int(values: OptionValues, flag: string): number {
  return Number(values[flag]);
}

export function bool(values: OptionValues, flag: string): boolean {
  return values[flag] === "true";
}

export function str(values: OptionValues, flag: string): string {
  return values[flag] ?? "";
}
