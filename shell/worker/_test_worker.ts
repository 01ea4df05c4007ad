// Test-only: run the worker in-process against a test proxy and a mock backend.
import type { LogFields, LogLevel } from "../log.ts";
import { connectUrlFor, type WorkerConfig } from "./config.ts";
import { type RunningWorker, startWorker } from "./connection.ts";

export type LogLine = { level: LogLevel; message: string; fields: LogFields };

export function testConfig(
  proxyUrl: string,
  backendUrl: string,
  over: Partial<WorkerConfig> = {},
): WorkerConfig {
  return {
    proxyUrl,
    connectUrl: connectUrlFor(proxyUrl, "local"),
    workerSecret: "test-secret",
    workerName: "test-worker",
    backendUrl,
    backendApiKey: null,
    models: ["mock-model"],
    maxConcurrent: 4,
    providerName: "local",
    logLevel: "debug",
    logFormat: "text",
    drainTimeoutSecs: 30,
    modelsRefreshSecs: 0,
    onServerShutdown: "exit",
    backendHeadTimeoutSecs: 300,
    maxResidentModels: null,
    autoLoad: false,
    ...over,
  };
}

export function runTestWorker(
  config: WorkerConfig,
  models: string[] = config.models ?? [],
): RunningWorker & { logs: LogLine[] } {
  const logs: LogLine[] = [];
  const worker = startWorker(config, models, {
    log: (level, message, fields = {}) => logs.push({ level, message, fields }),
    random: () => 0,
  });
  return { ...worker, logs };
}

export function requestFrame(
  id: string,
  body: Record<string, unknown>,
  over: Record<string, unknown> = {},
) {
  return {
    type: "request",
    request_id: id,
    model: "mock-model",
    endpoint_path: "/v1/chat/completions",
    is_streaming: body.stream === true,
    body: JSON.stringify({ model: "mock-model", ...body }),
    headers: { "content-type": "application/json" },
    ...over,
  };
}
