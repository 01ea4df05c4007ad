// Project lint rules (the mechanism denoland/std uses in _tools/lint_plugin.ts).
// `relay/core-purity` keeps core/ and sim/ deterministic and I/O-free: no Deno
// APIs, no clock, no randomness, no timers, no fetch, and imports only from
// within core/ (plus zod; sim/ may also use fast-check). The one exception is
// sim/cli.ts (and sim/cluster/cli.ts, sim/models/cli.ts): command-line entry
// points, which read arguments and report (wall-clock throughput, never fed
// back into a run).

const BANNED_GLOBALS = new Set([
  "Deno",
  "Date",
  "performance",
  "setTimeout",
  "setInterval",
  "fetch",
  "WebSocket",
]);
const BANNED_MEMBERS: Record<string, Set<string>> = {
  Math: new Set(["random"]),
  crypto: new Set(["randomUUID", "getRandomValues"]),
};

function area(filename: string): "core" | "sim" | null {
  const f = filename.replaceAll("\\", "/");
  if (/\/core\//.test(f)) return "core";
  if (/\/sim\//.test(f) && !/\/sim\/(cluster\/|models\/)?cli\.ts$/.test(f)) {
    return "sim";
  }
  return null;
}

function importAllowed(where: "core" | "sim", source: string): boolean {
  if (source === "zod") return true;
  if (where === "sim" && source === "fast-check") return true;
  if (source === "node:assert/strict" || source === "node:assert") return true;
  if (!source.startsWith(".")) return false;
  if (where === "core") return true; // relative, checked against shell/ below
  return true;
}

const plugin: Deno.lint.Plugin = {
  name: "relay",
  rules: {
    "core-purity": {
      create(context) {
        const where = area(context.filename);
        if (where === null) return {};
        return {
          Identifier(node) {
            if (!BANNED_GLOBALS.has(node.name)) return;
            const parent = node.parent;
            // `x.Date` or `{ Date: 1 }` are names, not the global.
            if (
              parent.type === "MemberExpression" && parent.property === node
            ) return;
            if (parent.type === "Property" && parent.key === node) return;
            // Tests may register themselves with Deno.test; nothing else of Deno.
            if (
              node.name === "Deno" && context.filename.endsWith("_test.ts") &&
              parent.type === "MemberExpression" &&
              parent.property.type === "Identifier" &&
              parent.property.name === "test"
            ) return;
            context.report({
              node,
              message:
                `${where}/ must stay pure: "${node.name}" is not allowed here`,
            });
          },
          MemberExpression(node) {
            if (
              node.object.type !== "Identifier" ||
              node.property.type !== "Identifier"
            ) return;
            const banned = BANNED_MEMBERS[node.object.name];
            if (banned?.has(node.property.name)) {
              context.report({
                node,
                message:
                  `${where}/ must stay pure: ${node.object.name}.${node.property.name} is not allowed`,
              });
            }
          },
          ImportDeclaration(node) {
            const source = node.source.value;
            const outside = source.includes("/shell/") ||
              source.includes("../shell") ||
              (where === "core" && source.startsWith("../../"));
            if (!importAllowed(where, source) || outside) {
              context.report({
                node,
                message: `${where}/ may import only from core/ and zod${
                  where === "sim" ? " and fast-check" : ""
                }: "${source}"`,
              });
            }
          },
        };
      },
    },
  },
};

export default plugin;
