// README.md is what a newcomer reads first: its commands and tables must match
// the code and the CI script.
import assert from "node:assert/strict";
import {
  optionTable,
  readmeTable,
  tableCells,
  TABLES,
} from "./_readme_tables.ts";

const ROOT = new URL("../", import.meta.url);
const readme = Deno.readTextFileSync(new URL("README.md", ROOT));
const denoJson = JSON.parse(
  Deno.readTextFileSync(new URL("deno.json", ROOT)),
) as { tasks: Record<string, string> };

Deno.test("README configuration tables list every server and worker option with its default", () => {
  for (const name of Object.keys(TABLES) as (keyof typeof TABLES)[]) {
    assert.deepEqual(
      tableCells(readmeTable(readme, name)),
      tableCells(optionTable(TABLES[name])),
      `README ${name} table is stale: run \`deno run --allow-read --allow-write e2e/_readme_tables.ts --write && deno fmt README.md\``,
    );
  }
});

Deno.test("README starts with the demo and test commands, the test one exactly as .ci/run greps it", () => {
  const lines = readme.split("\n");
  const test = lines.findIndex((l) =>
    /^npx -y deno@\d+\.\d+\.\d+ task test$/.test(l)
  );
  const demo = lines.findIndex((l) =>
    /^npx -y deno@\d+\.\d+\.\d+ task demo$/.test(l)
  );
  assert.ok(test !== -1 && demo !== -1);
  const contents = lines.indexOf("## Contents");
  assert.ok(
    contents !== -1 && test < contents && demo < contents,
    "both commands belong at the top, before the table of contents",
  );
  // One pinned version, the one CI runs.
  const versions = new Set(
    [...readme.matchAll(/deno@(\d+\.\d+\.\d+)/g)].map((m) => m[1]),
  );
  assert.equal(versions.size, 1, `versions: ${[...versions].join(", ")}`);
});

Deno.test("every `deno task NAME` the README mentions exists in deno.json", () => {
  const named = new Set(
    [...readme.matchAll(/deno task ([a-z][a-z0-9:-]*)/g)].map((m) => m[1]!),
  );
  const missing = [...named].filter((n) => !(n in denoJson.tasks));
  assert.deepEqual(missing, []);
});

Deno.test("every file under examples/ and the Docker files the README points to exist", () => {
  for (
    const m of readme.matchAll(
      /\b((?:examples\/[\w@./-]+)|Dockerfile|docker-compose\.yml)\b/g,
    )
  ) {
    const path = m[1]!.replace(/[.]$/, "");
    assert.ok(
      (() => {
        try {
          return Deno.statSync(new URL(path, ROOT)).isFile ||
            Deno.statSync(new URL(path, ROOT)).isDirectory;
        } catch {
          return false;
        }
      })(),
      `README mentions ${path}, which does not exist`,
    );
  }
});
