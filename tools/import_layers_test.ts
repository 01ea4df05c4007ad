import assert from "node:assert/strict";
import {
  type ImportGraph,
  importLoops,
  importsOf,
  layerViolations,
} from "./import_layers.ts";

const ROOT = new URL("../", import.meta.url);

/** Every non-test TypeScript file under these folders, with its relative imports. */
async function graphOf(folders: string[]): Promise<ImportGraph> {
  const graph: ImportGraph = new Map();
  const walk = async (dir: string): Promise<void> => {
    for await (const e of Deno.readDir(new URL(dir, ROOT))) {
      const path = `${dir}${e.name}`;
      if (e.isDirectory) await walk(`${path}/`);
      else if (path.endsWith(".ts") && !path.endsWith("_test.ts")) {
        const source = await Deno.readTextFile(new URL(path, ROOT));
        graph.set(path, importsOf(path, source));
      }
    }
  };
  for (const f of folders) await walk(f);
  return graph;
}

Deno.test("no core file imports from a layer above its own", async () => {
  assert.deepEqual(layerViolations(await graphOf(["core/"])), []);
});

Deno.test("no files import each other in a loop (core, shell, sim, mock, tools)", async () => {
  const graph = await graphOf(["core/", "shell/", "sim/", "mock/", "tools/"]);
  assert.deepEqual(importLoops(graph), []);
});

Deno.test("shell and sim use the worker core only through its surface, core/worker/mod.ts", async () => {
  const graph = await graphOf(["shell/", "sim/"]);
  const inside: string[] = [];
  for (const [file, imports] of graph) {
    for (const i of imports) {
      if (i.startsWith("core/worker/") && i !== "core/worker/mod.ts") {
        inside.push(`${file} imports ${i}`);
      }
    }
  }
  assert.deepEqual(inside, []);
  // The check sees the imports it should: the worker shell's loop uses it.
  assert(
    graph.get("shell/worker/connection.ts")?.includes("core/worker/mod.ts"),
  );
});

Deno.test("the layer rule fires on an import upstairs and into the worker core", () => {
  const graph: ImportGraph = new Map([
    ["core/state/a.ts", ["core/events/event.ts", "core/vocabulary.ts"]],
    ["core/effect.ts", ["core/state/lifecycle.ts"]],
    ["core/worker/decide.ts", ["core/state/state.ts", "core/protocol/mod.ts"]],
    ["core/events/on_x.ts", ["core/worker/decide.ts", "core/state/a.ts"]],
  ]);
  assert.deepEqual(layerViolations(graph), [
    "core/effect.ts (effects) imports core/state/lifecycle.ts (state)",
    "core/events/on_x.ts (events) imports core/worker/decide.ts (worker)",
    "core/state/a.ts (state) imports core/events/event.ts (events)",
    "core/worker/decide.ts (worker) imports core/state/state.ts (state)",
  ]);
});

Deno.test("the loop rule finds a two-file loop and a longer one, not a chain", () => {
  const graph: ImportGraph = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["a.ts"]],
    ["c.ts", ["d.ts"]],
    ["d.ts", ["e.ts"]],
    ["e.ts", ["c.ts"]],
    ["f.ts", ["a.ts", "c.ts"]],
  ]);
  assert.deepEqual(importLoops(graph), [["a.ts", "b.ts"], [
    "c.ts",
    "d.ts",
    "e.ts",
  ]]);
});

Deno.test("imports are read from import, export and multi-line forms, relative only", () => {
  const src = `import { a } from "./a.ts";
import type {
  B,
  C,
} from "../state/b.ts";
export * from "./protocol/mod.ts";
import "./side_effect.ts";
import { z } from "zod";
`;
  assert.deepEqual(importsOf("core/events/x.ts", src), [
    "core/events/a.ts",
    "core/state/b.ts",
    "core/events/protocol/mod.ts",
    "core/events/side_effect.ts",
  ]);
});
