// One scenario: its own system and browser, and its screenshots whatever
// the outcome.
import fs from 'node:fs';
import path from 'node:path';
import { launchBrowser, newContext } from './browser.mjs';
import { artifacts } from './paths.mjs';
import { startSystem } from './system.mjs';

/**
 * Runs one scenario with its own system and browser, and always leaves a
 * screenshot of every page it named (test-artifacts/e2e/<name>[-page].png)
 * and the process logs, whatever the outcome.
 */
export async function scenario(name, opts, body) {
  fs.mkdirSync(artifacts, { recursive: true });
  const sys = await startSystem(name, opts);
  let browser;
  const shots = new Map();
  try {
    browser = await launchBrowser();
    const ctx = {
      sys,
      browser,
      name,
      newContext: () => newContext(browser, name),
      /** Registers a page for the end-state screenshot. */
      shoot: (page, suffix = '') => shots.set(suffix, page),
      /** Takes a page's screenshot now (for a page closed before the end). */
      snap: async (page, suffix = '') => {
        shots.delete(suffix);
        await page.screenshot({ path: path.join(artifacts, `${name}${suffix ? '-' + suffix : ''}.png`) });
      },
    };
    await body(ctx);
  } finally {
    for (const [suffix, page] of shots) {
      await page.screenshot({ path: path.join(artifacts, `${name}${suffix ? '-' + suffix : ''}.png`), fullPage: false }).catch(() => undefined);
    }
    await browser?.close().catch(() => undefined);
    await sys.stop();
  }
}
