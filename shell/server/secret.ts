import { createHash, timingSafeEqual } from "node:crypto";

/** Constant-time comparison (C1): both sides hashed first so lengths never leak. */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}
