// One line per event of note, as text or JSON lines (LOG_FORMAT=json). Fields are
// chosen by the caller; secrets and bodies are never passed in.
import type { LogFields, LogLevel } from "../core/log.ts";
import type { OptionSpec } from "./options.ts";

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
    help: "trace, debug, info, warn or error",
  },
  {
    flag: "log-format",
    env: "LOG_FORMAT",
    kind: "string",
    default: "text",
    help: "text or json (JSON lines)",
  },
];

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

export function makeLogger(
  min: LogLevel,
  format: LogFormat,
  component: string,
): Logger {
  const encoder = new TextEncoder();
  return (level, message, fields = {}) => {
    if (RANK[level] < RANK[min]) return;
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
