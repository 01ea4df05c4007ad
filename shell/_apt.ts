// Test-only: the one way the tests get a program they drive (redis-server and
// redis-sentinel for the cluster tests, Chromium for the browser tests) onto
// a machine that lacks it. Where we are root with apt-get (as on CI), Debian's
// package is installed; elsewhere the caller fails with one line saying how.
// Never skips.

/** Whether `path` is a file (false where it does not exist). */
export async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

/** The path of `program` on PATH, else null. */
export async function which(program: string): Promise<string | null> {
  for (const dir of (Deno.env.get("PATH") ?? "/usr/bin").split(":")) {
    if (await isFile(`${dir}/${program}`)) return `${dir}/${program}`;
  }
  return null;
}

async function isRoot(): Promise<boolean> {
  try {
    const out = await new Deno.Command("id", { args: ["-u"], stdout: "piped" })
      .output();
    return new TextDecoder().decode(out.stdout).trim() === "0";
  } catch {
    return false;
  }
}

/** One apt-get call; its stderr's last lines go to ours when it fails. */
async function aptGet(args: string[]): Promise<boolean> {
  // Every apt-get call waits for the dpkg lock: other test runs install too.
  const all = ["-o", "DPkg::Lock::Timeout=600", ...args];
  const out = await new Deno.Command("apt-get", {
    args: all,
    env: { DEBIAN_FRONTEND: "noninteractive" },
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) {
    const tail = new TextDecoder().decode(out.stderr).trim().split("\n")
      .slice(-5).join("\n");
    console.error(`apt-get ${all.join(" ")} failed:\n${tail}`);
  }
  return out.success;
}

/**
 * Installs Debian's `pkg` when we are root with apt-get (with an apt-get
 * update first only if the plain install fails); whether it was installed.
 * `why` names the tests that need it, in the line that says so.
 */
export async function aptInstall(pkg: string, why: string): Promise<boolean> {
  if (!(await isRoot()) || await which("apt-get") === null) return false;
  console.error(`installing ${pkg} with apt-get (${why})`);
  return await aptGet(["install", "-y", pkg]) ||
    (await aptGet(["update"]) && await aptGet(["install", "-y", pkg]));
}
