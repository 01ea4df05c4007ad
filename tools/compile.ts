// `deno task compile`: standalone server and worker binaries for every supported
// platform into dist/, each with the same explicit permissions as its task.
//
// `deno compile --target` downloads the Deno runtime (denort) for each target
// from dl.deno.land, so this needs internet access beyond the npm registry; it
// cannot run on our build network and CI does not run it. What CI does check is
// that both entry points type-check (e2e/compile_test.ts).
//
//   deno task compile                          every target
//   deno task compile --target x86_64-unknown-linux-gnu
//   deno task compile --dry-run                print the commands only
import { parseArgs } from "node:util";

export const TARGETS = [
  "x86_64-unknown-linux-gnu",
  "aarch64-unknown-linux-gnu",
  "x86_64-apple-darwin",
  "aarch64-apple-darwin",
  "x86_64-pc-windows-msvc",
] as const;

/** Entry points and the permissions baked into their binaries (as in deno.json tasks). */
export const BINARIES = [
  {
    name: "modelrelay-server",
    entry: "shell/server/main.ts",
    permissions: [
      "--allow-net",
      "--allow-env",
      "--allow-read",
      "--allow-write",
    ],
  },
  {
    name: "modelrelay-worker",
    entry: "shell/worker/main.ts",
    permissions: [
      "--allow-net",
      "--allow-env",
      "--allow-read",
      "--allow-sys=hostname",
    ],
  },
] as const;

/** The `deno compile` argument lists, one per binary and target. */
export function compileCommands(
  targets: readonly string[] = TARGETS,
): { output: string; args: string[] }[] {
  return targets.flatMap((target) =>
    BINARIES.map((b) => {
      const output = `dist/${b.name}-${target}`;
      return {
        output,
        args: [
          "compile",
          "--target",
          target,
          ...b.permissions,
          "--output",
          output,
          b.entry,
        ],
      };
    })
  );
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      target: { type: "string", multiple: true },
      "dry-run": { type: "boolean", default: false },
    },
    strict: true,
  });
  const targets = values.target ?? [...TARGETS];
  const unknown = targets.filter((t) =>
    !(TARGETS as readonly string[]).includes(t)
  );
  if (unknown.length > 0) {
    console.error(
      `unknown target ${unknown.join(", ")}; known: ${TARGETS.join(", ")}`,
    );
    return 2;
  }
  const root = decodeURIComponent(new URL("../", import.meta.url).pathname);
  for (const { output, args } of compileCommands(targets)) {
    console.log(`deno ${args.join(" ")}`);
    if (values["dry-run"]) continue;
    const { code } = await new Deno.Command(Deno.execPath(), {
      args,
      cwd: root,
      stdin: "null",
      stdout: "inherit",
      stderr: "inherit",
    }).output();
    if (code !== 0) {
      console.error(
        `compile: ${output} failed (exit ${code}). deno compile downloads the runtime for each target from dl.deno.land; without internet access it cannot work.`,
      );
      return code;
    }
  }
  if (!values["dry-run"]) console.log(`binaries are in ${root}dist/`);
  return 0;
}

if (import.meta.main) Deno.exit(await main());
