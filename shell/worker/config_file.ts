// The worker's --config file (issue 32): the TOML the original's setup wizard
// writes, its keys read as the options they name. The file sits below flags
// and environment and above the defaults (readOptions' `file` lookup).
import type { OptionSpec } from "../options.ts";
import { parseToml, TomlError, type TomlValue } from "./toml.ts";

/** A config file that cannot be read or parsed: the worker exits 1 with it. */
export class ConfigFileError extends Error {}

/** The original's file keys, each the option it names here. */
const ORIGINAL_KEYS: Record<string, string> = {
  proxy_url: "proxy-url",
  provider: "provider-name",
  worker_secret: "worker-secret",
  worker_name: "worker-name",
  models: "models",
  max_concurrency: "max-concurrent",
  backend_url: "backend-url",
  log_level: "log-level",
};

/** Options that take a comma-separated list, so a TOML array too. */
const LIST_OPTIONS = new Set(["models", "endpoint-prefixes"]);

/**
 * The file's settings keyed by option flag, as the text a flag would carry
 * (an array joined with commas: `models = ["*"]` is `*`), and one warning per
 * key no option reads (the original ignores those; we name them).
 */
export function configFileValues(
  path: string,
  readFile: (path: string) => string,
  specs: OptionSpec[],
): { values: Record<string, string>; warnings: string[] } {
  let text: string;
  try {
    text = readFile(path);
  } catch (e) {
    throw new ConfigFileError(
      `failed to read config file '${path}': ${(e as Error).message}`,
    );
  }
  let table: Record<string, TomlValue>;
  try {
    table = parseToml(text);
  } catch (e) {
    if (!(e instanceof TomlError)) throw e;
    throw new ConfigFileError(
      `failed to parse config file '${path}': ${e.message}`,
    );
  }
  const flags = new Set(specs.map((s) => s.flag));
  const values: Record<string, string> = {};
  const warnings: string[] = [];
  for (const [key, value] of Object.entries(table)) {
    const flag = ORIGINAL_KEYS[key] ?? key.replaceAll("_", "-");
    if (!flags.has(flag) || flag === "config") {
      warnings.push(`config file '${path}': unknown key "${key}" ignored`);
      continue;
    }
    if (Array.isArray(value) && !LIST_OPTIONS.has(flag)) {
      throw new ConfigFileError(
        `failed to parse config file '${path}': "${key}" takes one value, not an array`,
      );
    }
    values[flag] = Array.isArray(value)
      ? value.map(String).join(",")
      : String(value);
  }
  return { values, warnings };
}
