export * from "./messages.ts";
export * from "./decode.ts";
export * from "./encode.ts";
export * from "./binary.ts";
export * from "./error_body.ts";
export * from "./frame_limit.ts";
export * from "./errors.ts";
export * from "./headers.ts";
