// Waiting on conditions outside the browser, with generous deadlines.

/** Generous: the machine has two cores and runs Postgres, Go and Chromium at once. */
export const T = { short: 15_000, long: 60_000 };

/**
 * Polls fn until it returns a truthy value (returned) or the deadline passes.
 * For conditions outside the browser (the database, a process); inside the
 * page, use playwright's waitForFunction / waitForSelector.
 */
export async function waitUntil(fn, { timeout = T.long, interval = 100, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout}ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, interval));
  }
}
