/** Exhaustiveness check for `switch` over tagged unions (std's is JSR-only). */
export function assertNever(value: never): never {
  throw new Error(`Unexpected variant: ${JSON.stringify(value)}`);
}
