// The core's floor plan, checked: which layer each core file is on, and the two
// rules the import graph must keep. A file imports only from its own layer or
// below, and no two files reach each other through imports (a loop blurs which
// layer is which even when the imports are type-only). Used by
// tools/import_layers_test.ts over the real tree; pure over the graph it is given.

/** Ground floor first. A path matches the first pattern that is its prefix. */
export const CORE_LAYERS: { name: string; prefixes: string[] }[] = [
  {
    name: "vocabulary",
    prefixes: [
      "core/vocabulary.ts",
      "core/version.ts",
      "core/config.ts",
      "core/log.ts",
      "core/assert_never.ts",
      "core/protocol/",
    ],
  },
  { name: "effects", prefixes: ["core/effect.ts"] },
  { name: "worker", prefixes: ["core/worker/"] },
  { name: "state", prefixes: ["core/state/"] },
  { name: "events", prefixes: ["core/events/"] },
  {
    name: "entry",
    prefixes: [
      "core/reduce.ts",
      "core/queries.ts",
      "core/views/",
      "core/mod.ts",
      "core/",
    ],
  },
];

/** The worker's core stands beside the server's: it may use only the ground floor. */
const SIDE_LAYERS = new Set(["worker"]);

export type ImportGraph = Map<string, string[]>;

export function layerOf(path: string): number {
  const i = CORE_LAYERS.findIndex((l) =>
    l.prefixes.some((p) => p.endsWith("/") ? path.startsWith(p) : path === p)
  );
  return i;
}

/** Every import of a core file that goes to a layer above it (or sideways into the worker core). */
export function layerViolations(graph: ImportGraph): string[] {
  const out: string[] = [];
  for (const [from, targets] of graph) {
    const a = layerOf(from);
    if (a < 0) continue;
    for (const to of targets) {
      const b = layerOf(to);
      if (b < 0) continue;
      const sideways = a !== b &&
        (SIDE_LAYERS.has(CORE_LAYERS[a]!.name) ||
          SIDE_LAYERS.has(CORE_LAYERS[b]!.name)) &&
        b !== 0;
      if (b > a || sideways) {
        out.push(
          `${from} (${CORE_LAYERS[a]!.name}) imports ${to} (${
            CORE_LAYERS[b]!.name
          })`,
        );
      }
    }
  }
  return out.sort();
}

/** Import loops, each as the files on it (Tarjan's strongly connected components). */
export function importLoops(graph: ImportGraph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const loops: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      const selfLoop = (graph.get(v) ?? []).includes(v);
      if (component.length > 1 || selfLoop) loops.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return loops;
}

const IMPORT_RE =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|(?:^|\n)\s*import\s+"([^"]+)"/g;

/** Relative import targets of one file's source, as repository paths. */
export function importsOf(path: string, source: string): string[] {
  const dir = path.split("/").slice(0, -1);
  const out: string[] = [];
  for (const m of source.matchAll(IMPORT_RE)) {
    const spec = m[1] ?? m[2]!;
    if (!spec.startsWith(".")) continue;
    const parts = [...dir];
    for (const seg of spec.split("/")) {
      if (seg === "..") parts.pop();
      else if (seg !== ".") parts.push(seg);
    }
    out.push(parts.join("/"));
  }
  return out;
}
