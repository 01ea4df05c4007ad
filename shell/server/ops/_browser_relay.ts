// A page of a fresh Chromium (_chromium.ts) against a fresh relay that has an
// admin token: what every dashboard test starts from. Both are closed after
// `fn`, whatever it throws.
import type { Page } from "playwright-core";
import {
  ADMIN_TOKEN,
  startTestRelay,
  type TestRelay,
} from "../_relay_test_helpers.ts";
import { testConfig } from "../_test_helpers.ts";
import { launchBrowser } from "./_chromium.ts";

export async function withBrowserAndRelay(
  fn: (page: Page, relay: TestRelay) => Promise<void>,
): Promise<void> {
  const relay = await startTestRelay(
    testConfig({}, { adminToken: ADMIN_TOKEN }),
  );
  let browser;
  try {
    browser = await launchBrowser();
    const page = await browser.context.newPage();
    page.setDefaultTimeout(10_000);
    await fn(page, relay);
  } finally {
    await browser?.close();
    await relay.close();
  }
}
