// The baseline path of bench:e2e (issue 31, `--baseline <commit>`): an older
// commit's server and worker run beside ours in the same interleaved run, so
// "at most half of 9ef0db5's" is read off one run on one loaded machine, not
// from two runs minutes apart. The commit's tree is exported with `git archive`
// into a fresh /tmp/modelrelay-base-<commit>-XXXXXX/, removed when the run
// ends: unlike `git worktree add` it leaves no entry in the repository's
// worktree list when a run is interrupted.
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
 * Exports `commit`'s tree into a fresh directory under /tmp and returns its
 * path; `remove` deletes it. Outside the repository on purpose: under
 * bench/results it would be type-checked by `deno task check bench/`.
 */
export async function baselineCheckout(
  commit: string,
  log: (line: string) => void,
): Promise<{ dir: string; commit: string; remove(): Promise<void> }> {
  const full = await git(["rev-parse", "--verify", `${commit}^{commit}`]);
  const short = full.slice(0, 12);
  // A subprocess does it: bench:e2e may write only under bench/results.
  const out = await new Deno.Command("sh", {
    args: [
      "-c",
      'd=$(mktemp -d "/tmp/modelrelay-base-$2-XXXXXX") && git -C "$1" archive --format=tar "$2" | tar -x -C "$d" && echo "$d"',
      "sh",
      ROOT,
      full,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dir = new TextDecoder().decode(out.stdout).trim();
  if (!out.success || dir === "") {
    throw new Error(
      `exporting ${short} failed: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
  log(`baseline ${short} exported into ${dir}`);
  return {
    dir,
    commit: short,
    async remove() {
      await new Deno.Command("rm", { args: ["-rf", "--", dir] }).output();
    },
  };
}
