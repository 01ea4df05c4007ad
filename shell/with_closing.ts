// "Start it, use it, always close it": `fn` runs on what `start` resolves to,
// which is closed after `fn` whatever it throws (the test servers, relays and
// mock backends the tests start).

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
