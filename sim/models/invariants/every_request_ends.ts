// everyRequestEnds (C34, issue 30): every request that arrived ends exactly
// once (a response, an error, or the end of its stream) before the run ends,
// loads, swaps and workers dying mid-load included.
export function everyRequestEnds(
  arrived: readonly string[],
  ends: ReadonlyMap<string, number>,
): string | null {
  for (const id of arrived) {
    const n = ends.get(id) ?? 0;
    if (n !== 1) return `${id} ended ${n} times`;
  }
  return null;
}
