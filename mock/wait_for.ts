// Test helper: wait for a condition, bounded, instead of sleeping a fixed time.

/** Polls `check` every few ms until it returns true; throws after `timeoutMs`. */
export async function waitFor(
  label: string,
  check: () => boolean,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${label}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Rejects if `promise` takes longer than `timeoutMs`; always clears its timer. */
export async function within<T>(
  label: string,
  promise: Promise<T>,
  timeoutMs = 5_000,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(`timed out after ${timeoutMs} ms waiting for ${label}`),
        ),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
