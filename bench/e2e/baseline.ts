// The baseline path of bench:e2e (issue 31, `--baseline <commit>`): an older
// commit's server and worker run beside ours in the same interleaved run, so
// "at most half of 9ef0db5's" is read off one run on one loaded machine, not
// from two runs minutes apart. The commit's tree is exported with `git archive`
// into bench/results/base-<commit>/ (gitignored, kept for the next run): unlike
// `git worktree add` it leaves no entry in the repository's worktree list when
// a run is interrupted, and needs no cleanup.
import { ROOT } from "../../shell/procs.ts";

/** The default baseline: main before issue 31's work began. */
export const DEFAULT_BASELINE = "9ef0db5";

async function git(args: string[]): Promise<string> {
  const out = await new Deno.Command("git", {
    args: ["-C", ROOT, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(
      `git ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return new TextDecoder().decode(out.stdout).trim();
}

/**
 * The directory holding `commit`'s tree (exported on first use). Returns the
 * absolute path of the checkout, whose shell/server/main.ts and
 * shell/worker/main.ts run with its own deno.json.
 */
export async function baselineCheckout(
  commit: string,
  resultsDir: string,
  log: (line: string) => void,
): Promise<{ dir: string; commit: string }> {
  const full = await git(["rev-parse", "--verify", `${commit}^{commit}`]);
  const short = full.slice(0, 12);
  const dir = `${resultsDir}/base-${short}`;
  const marker = `${dir}/.exported`;
  try {
    await Deno.stat(marker);
    return { dir, commit: short };
  } catch {
    // Not there yet (or half written by an interrupted run): export afresh.
  }
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  const out = await new Deno.Command("sh", {
    args: [
      "-c",
      'git -C "$1" archive --format=tar "$2" | tar -x -C "$3"',
      "sh",
      ROOT,
      full,
      dir,
    ],
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(
      `exporting ${short} into ${dir} failed: ${
        new TextDecoder().decode(out.stderr)
      }`,
    );
  }
  await Deno.writeTextFile(marker, `${full}\n`);
  log(`baseline ${short} exported into ${dir}`);
  return { dir, commit: short };
}
