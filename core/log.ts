// Log vocabulary shared by the pure parts (the worker core's `log` actions) and
// the shells' loggers: levels and the flat fields a line carries.
export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";
export type LogFields = Record<string, string | number | boolean>;
