// Test-only: what the metrics tests ask of a Prometheus exposition, by whole
// lines written as a scrape shows them (no regular expression to escape).
import assert from "node:assert/strict";

/** Each of `lines` is a whole line of the exposition `text`. */
export function assertLines(text: string, lines: readonly string[]): void {
  const have = new Set(text.split("\n"));
  for (const line of lines) {
    assert.ok(have.has(line), `no line ${line} in:\n${text}`);
  }
}
