// "Start it, use it, always close it": `fn` runs on what `start` resolves to,
// which is closed after `fn` whatever it throws (the test servers, relays and
// mock backends the tests start); the same for a temporary directory.

export async function withClosing<T extends { close(): Promise<unknown> }>(
  start: Promise<T>,
  fn: (it: T) => Promise<void>,
): Promise<void> {
  const it = await start;
  try {
    await fn(it);
  } finally {
    await it.close();
  }
}

/** `fn` on a new temporary directory, removed with all it holds after `fn` whatever it throws. */
export async function withTempDir(
  fn: (dir: string) => void | Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
