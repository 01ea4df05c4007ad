// How far the server's configuration travels, counted from call stacks (issue
// 27). Every read of a configuration field records the stack; each stack
// becomes its chain of shell modules, outermost first, a module repeated only
// when the chain left it and came back. The trail is the union of the chains:
// the modules the configuration passes through, and how often a chain comes
// back to a module it had left (a closure built in the assembly and called from
// a route is one such return). tools/config_trail_run.ts drives a relay through
// every route family and prints both figures; this file is the pure counting.
// Only shell modules count (the core is handed its own part once), and not
// test-only files (named `_*.ts`), which stand where main.ts would.

/** The shell modules of one V8 stack, outermost first, consecutive repeats folded. */
export function chainOf(stack: string, root: string): string[] {
  const out: string[] = [];
  for (const line of stack.split("\n").reverse()) {
    const at = line.indexOf(root);
    if (at < 0) continue;
    const path = line.slice(at + root.length).replace(/:\d+:\d+\)?\s*$/, "");
    // Test helpers start the relay as main.ts would; they are not the relay.
    const file = path.slice(path.lastIndexOf("/") + 1);
    if (!path.startsWith("shell/") || file.startsWith("_")) continue;
    if (out[out.length - 1] !== path) out.push(path);
  }
  return out;
}

export type Trail = { modules: string[]; returns: string[] };

/**
 * The modules on any chain, and the returns: each distinct chain prefix that
 * ends in a module already on it earlier, listed once however many reads took it.
 */
export function trailOf(chains: string[][]): Trail {
  const modules = new Set<string>();
  const returnPrefixes = new Set<string>();
  for (const chain of chains) {
    const seen = new Set<string>();
    chain.forEach((m, i) => {
      modules.add(m);
      if (seen.has(m)) returnPrefixes.add(chain.slice(0, i + 1).join(" > "));
      seen.add(m);
    });
  }
  return { modules: [...modules].sort(), returns: [...returnPrefixes].sort() };
}
