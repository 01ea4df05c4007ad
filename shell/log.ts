// One line per event of note, as text or JSON lines (LOG_FORMAT=json). Fields are
// chosen by the caller; secrets and bodies are never passed in.
import type { LogFields, LogLevel } from "../core/log.ts";
import {
  OptionError,
  type OptionSpec,
  type OptionValues,
  str,
} from "./options.ts";

export type { LogFields, LogLevel };
export type LogFormat = "text" | "json";
export type Logger = (
  level: LogLevel,
  message: string,
  fields?: LogFields,
) => void;

/** LOG_LEVEL and LOG_FORMAT, the same for server and worker. */
export const LOG_OPTIONS: OptionSpec[] = [
  {
    flag: "log-level",
    env: "LOG_LEVEL",
    kind: "string",
    default: "info",
    help:
      "trace, debug, info, warn or error (or a RUST_LOG-style directive such as modelrelay_server=debug); RUST_LOG, when set, overrides LOG_LEVEL",
  },
  {
    flag: "log-format",
    env: "LOG_FORMAT",
    kind: "string",
    default: "text",
    help: "text or json (JSON lines)",
  },
];

/** What the server's and the worker's configurations say of their logs. */
export type LogSettings = { logLevel: LogLevel; logFormat: LogFormat };

/**
 * LOG_LEVEL and LOG_FORMAT read from parsed options, the same rule for server
 * and worker: a level logLevelOf knows, and text or json in any case.
 */
export function logSettings(values: OptionValues): LogSettings {
  const logLevel = logLevelOf(str(values, "log-level"));
  if (logLevel === null) {
    throw new OptionError(
      `LOG_LEVEL must be trace, debug, info, warn or error, got "${
        str(values, "log-level")
      }"`,
    );
  }
  const logFormat = str(values, "log-format").toLowerCase();
  if (logFormat !== "text" && logFormat !== "json") {
    throw new OptionError(
      `LOG_FORMAT must be text or json, got "${logFormat}"`,
    );
  }
  return { logLevel, logFormat };
}

const RANK: Record<LogLevel, number> = {
  trace: 0,
  debug: 1,
  info: 2,
  warn: 3,
  error: 4,
};

export function isLogLevel(s: string): s is LogLevel {
  return s in RANK;
}

/** The original's level words (tracing's EnvFilter) in ours; `off` is our quietest. */
const RUST_WORDS: Record<string, LogLevel> = {
  trace: "trace",
  debug: "debug",
  info: "info",
  warn: "warn",
  warning: "warn",
  error: "error",
  off: "error",
};

/**
 * The level a RUST_LOG-style filter asks of this program (issue 32):
 * `debug`, or directives like `info,modelrelay_server=debug`, where a
 * directive for a `modelrelay…` target wins over the bare level. Null when
 * nothing in it is a level word (the original then ignores RUST_LOG too).
 */
export function rustLogLevel(raw: string): LogLevel | null {
  let bare: LogLevel | null = null;
  let ours: LogLevel | null = null;
  for (const part of raw.toLowerCase().split(",").map((p) => p.trim())) {
    const eq = part.indexOf("=");
    const level = RUST_WORDS[eq < 0 ? part : part.slice(eq + 1).trim()];
    if (level === undefined) continue;
    if (eq < 0) bare = level;
    else if (part.startsWith("modelrelay")) {
      ours = ours === null || RANK[level] < RANK[ours] ? level : ours;
    }
  }
  return ours ?? bare;
}

/**
 * The environment with RUST_LOG, when it names a level, read as LOG_LEVEL: as
 * in the original it overrides LOG_LEVEL (a --log-level flag still wins).
 */
export function withRustLog(
  env: (name: string) => string | undefined,
): (name: string) => string | undefined {
  return (name) => {
    if (name !== "LOG_LEVEL") return env(name);
    const rust = env("RUST_LOG");
    return (rust === undefined ? null : rustLogLevel(rust)) ?? env(name);
  };
}

/** A LOG_LEVEL value as a level: one of ours, or the original's directive form. */
export function logLevelOf(raw: string): LogLevel | null {
  const word = raw.trim().toLowerCase();
  return isLogLevel(word) ? word : rustLogLevel(word);
}

/** Whether a logger at `min` keeps a line at `level`: the one rule of LOG_LEVEL. */
export function keepsLevel(min: LogLevel, level: LogLevel): boolean {
  return RANK[level] >= RANK[min];
}

export function makeLogger(
  min: LogLevel,
  format: LogFormat,
  component: string,
): Logger {
  const encoder = new TextEncoder();
  return (level, message, fields = {}) => {
    if (!keepsLevel(min, level)) return;
    const time = new Date().toISOString();
    let line: string;
    if (format === "json") {
      line = JSON.stringify({ time, level, component, message, ...fields });
    } else {
      const parts = Object.entries(fields).map(([k, v]) =>
        `${k}=${formatValue(v)}`
      );
      line = `${time} ${
        level.toUpperCase().padEnd(5)
      } ${component}: ${message}${
        parts.length > 0 ? " " + parts.join(" ") : ""
      }`;
    }
    const out = RANK[level] >= RANK.warn ? Deno.stderr : Deno.stdout;
    out.writeSync(encoder.encode(line + "\n"));
  };
}

function formatValue(v: string | number | boolean): string {
  const s = String(v);
  return /[\s"=]/.test(s) || s.length === 0 ? JSON.stringify(s) : s;
}
