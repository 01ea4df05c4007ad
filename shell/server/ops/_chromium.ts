// Test-only: finds the Chromium the browser tests drive with playwright-core.
// CHROMIUM_PATH, else /usr/bin/chromium; when neither exists and we are root with
// apt-get (as on CI), installs Debian's `chromium` package (shell/_apt.ts);
// otherwise fails with one line saying how to get one. Never skips.
import type { BrowserContext } from "playwright-core";
import { aptInstall, isFile } from "../../_apt.ts";

export const DEFAULT_CHROMIUM = "/usr/bin/chromium";

const HOW_TO =
  "no Chromium for the browser tests: run `sudo apt-get install -y chromium` (Debian/Ubuntu) or set CHROMIUM_PATH to a Chromium or Chrome binary";

let found: Promise<string> | null = null;

/** The Chromium binary to drive; installs it with apt-get when root (CI). */
export function ensureChromium(): Promise<string> {
  found ??= locate();
  return found;
}

async function locate(): Promise<string> {
  const explicit = Deno.env.get("CHROMIUM_PATH");
  if (explicit !== undefined && explicit !== "") {
    if (await isFile(explicit)) return explicit;
    throw new Error(`CHROMIUM_PATH=${explicit} does not exist; ${HOW_TO}`);
  }
  if (await isFile(DEFAULT_CHROMIUM)) return DEFAULT_CHROMIUM;
  if (
    await aptInstall("chromium", "browser tests") &&
    await isFile(DEFAULT_CHROMIUM)
  ) return DEFAULT_CHROMIUM;
  throw new Error(HOW_TO);
}

export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export type Browser = {
  context: BrowserContext;
  close(): Promise<void>;
};

/** What playwright-core reads at load under Deno, besides env, read, write and run. */
const SYS_NEEDED = ["homedir", "osRelease"] as const;

/** playwright-core, loaded only once the permissions it needs are known to be there. */
async function loadPlaywright(): Promise<typeof import("playwright-core")> {
  for (const kind of SYS_NEEDED) {
    const p = await Deno.permissions.query({ name: "sys", kind });
    if (p.state !== "granted") {
      throw new Error(
        `the browser tests need --allow-sys=${
          SYS_NEEDED.join(",")
        } for playwright-core (see the test:shell task in deno.json)`,
      );
    }
  }
  return await import("playwright-core");
}

/** A fresh headless Chromium with its own throwaway profile directory. */
export async function launchBrowser(): Promise<Browser> {
  const { chromium } = await loadPlaywright();
  const executablePath = await ensureChromium();
  const userDataDir = await Deno.makeTempDir({ prefix: "modelrelay-chrome-" });
  let context: BrowserContext;
  try {
    // launchPersistentContext passes --user-data-dir=userDataDir itself.
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath,
      headless: true,
      args: CHROMIUM_FLAGS,
      timeout: 30_000,
    });
  } catch (e) {
    await Deno.remove(userDataDir, { recursive: true }).catch(() => {});
    throw e;
  }
  return {
    context,
    async close() {
      await context.close();
      await Deno.remove(userDataDir, { recursive: true }).catch(() => {});
    },
  };
}
