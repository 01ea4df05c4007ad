// Options read from flags, then environment, then defaults (flags win), with
// validation that names the option and what a valid value looks like.
import { parseArgs } from "node:util";

export type OptionKind = "string" | "int" | "bool" | "secret";
export type OptionSpec = {
  flag: string;
  /** "" = a flag only (no environment variable). */
  env: string;
  kind: OptionKind;
  default: string | null;
  help: string;
  min?: number;
  /** Other flag names for the same option (the original's, issue 32). */
  aliases?: string[];
  /** Other environment variables read when `env` is unset, in order (issue 32). */
  envAliases?: string[];
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
    const flags = [s.flag, ...(s.aliases ?? [])].map((f) => `--${f}`).join(
      ", ",
    );
    const envs = s.env === ""
      ? "(flag only)"
      : [s.env, ...(s.envAliases ?? [])].join(", ");
    const bare = s.kind === "bool" ? " (bare flag = true)" : "";
    return `  ${flags.padEnd(26)} ${
      envs.padEnd(28)
    } default ${def}${bare}\n      ${s.help}`;
  });
  return `${title}\n\nUsage: ${usage}\n\nOptions (flag, environment variable, default):\n${
    rows.join("\n")
  }\n  --help                   show this help\n`;
}

const BOOL_WORDS = ["true", "false", "1", "0", "yes", "no"];

/**
 * The arguments with every alias spelled as its option's own flag, and a bare
 * boolean flag (`--require-api-keys` with no value after it) given `true`.
 */
export function canonicalArgs(args: string[], specs: OptionSpec[]): string[] {
  const byName = new Map<string, OptionSpec>();
  for (const s of specs) {
    for (const name of [s.flag, ...(s.aliases ?? [])]) byName.set(name, s);
  }
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const m = /^--([^=]+)(=.*)?$/s.exec(arg);
    const spec = m === null ? undefined : byName.get(m[1]!);
    if (m === null || spec === undefined) {
      out.push(arg);
      continue;
    }
    out.push(`--${spec.flag}${m[2] ?? ""}`);
    const next = args[i + 1];
    const valueFollows = next !== undefined &&
      (spec.kind !== "bool" || BOOL_WORDS.includes(next.toLowerCase()));
    if (m[2] === undefined && spec.kind === "bool" && !valueFollows) {
      out.push("true");
    }
  }
  return out;
}

/**
 * Reads every option: flag, then environment (its own name, then its aliases),
 * then `file` (a config file's value, the worker's --config), then the default.
 * Throws OptionError with a one-line reason on invalid input.
 */
export function readOptions(
  args: string[],
  env: (name: string) => string | undefined,
  specs: OptionSpec[],
  file: (flag: string) => string | undefined = () => undefined,
): { values: OptionValues; help: boolean } {
  const parseSpec: Record<string, { type: "string" | "boolean" }> = {
    help: { type: "boolean" },
  };
  for (const s of specs) parseSpec[s.flag] = { type: "string" };
  let parsed;
  try {
    parsed = parseArgs({
      args: canonicalArgs(args, specs),
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
    const fromEnv = s.env === ""
      ? undefined
      : [s.env, ...(s.envAliases ?? [])].map(env).find((v) => v !== undefined);
    const raw = typeof fromFlag === "string"
      ? fromFlag
      : fromEnv ?? file(s.flag) ?? s.default;
    values[s.flag] = raw === null ? null : validate(s, raw.trim());
  }
  return { values, help: parsed.values.help === true };
}

function validate(s: OptionSpec, raw: string): string {
  const name = s.env === "" ? `--${s.flag}` : `${s.env} (--${s.flag})`;
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
        !BOOL_WORDS.includes(raw.toLowerCase())
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
