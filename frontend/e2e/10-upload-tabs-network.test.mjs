// Scenario 10: an upload outlives a pause, its tab and a lost network. Two
// tabs of one browser, behind a proxy that passes 1 MiB a second to the
// gateway; tab A starts a 12 MiB upload, tab B shows it. Then:
//   - pause in B: the upload stops in A (the pause is stored, every tab sees
//     it); resume in A: it goes on from the server's offset;
//   - the tab that drives it (A, or B if B got the lock first) is closed
//     mid-upload: the other, which was queued for the upload's lock,
//     carries it on from the server's offset;
//   - that tab loses the network for two seconds (the browser is offline):
//     the upload waits and goes on from the server's offset when it is back.
// One upload is created in all, never restarted from zero, and the file
// that reaches the engine is byte for byte the one picked.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { T, answerText, artifacts, openApp, scenario, sendShown, startThrottleProxy, waitStatus, waitUntil } from './harness.mjs';

const SIZE = 12 << 20;
const NAME = 'capture.bin';

const isPatch = (r) => r.method() === 'PATCH' && new URL(r.url()).pathname.startsWith('/v1/uploads/');

/** The next PATCH the page sends: its Upload-Offset. */
const nextPatch = (page) => page.waitForRequest(isPatch, { timeout: T.long }).then((r) => Number(r.headers()['upload-offset']));

/** The next PATCH any tab of the context sends: the tab, and its Upload-Offset. */
const nextPatchIn = (context) =>
  context.waitForEvent('request', { predicate: isPatch, timeout: T.long }).then((r) => ({ page: r.frame().page(), offset: Number(r.headers()['upload-offset']) }));

test('an upload survives a pause, its tab being closed and a lost network', { timeout: 240_000 }, async (t) => {
  await scenario('10-upload-tabs-network', {}, async ({ sys, newContext, shoot, snap, browser }) => {
    const proxy = await startThrottleProxy(sys.port, { upBytesPerSec: 1 << 20 });
    const base = `http://127.0.0.1:${proxy.port}`;
    /** Waits until n more bytes reached the gateway. */
    const gatewayGets = async (n) => {
      const from = proxy.forwarded();
      await waitUntil(() => proxy.forwarded() - from >= n, { what: `${n} more bytes at the gateway`, interval: 20 });
    };
    try {
      const data = randomBytes(SIZE);
      const sha = createHash('sha256').update(data).digest('hex');
      const context = await newContext();
      const tus = [];
      context.on('request', (r) => {
        const u = new URL(r.url());
        if (u.pathname.startsWith('/v1/uploads')) tus.push({ method: r.method(), path: u.pathname, offset: r.headers()['upload-offset'] ?? null });
      });
      const a = await context.newPage();
      await openApp(a, base);
      const b = await context.newPage();
      shoot(b, 'survivor');
      await openApp(b, base);

      await a.setInputFiles('[data-testid="file-input"]', { name: NAME, mimeType: 'application/octet-stream', buffer: data });
      // B shows A's upload (the drafts are stored beside the task pointers).
      await b.waitForSelector('[data-testid="draft"][data-state="uploading"]', { timeout: T.short });
      await gatewayGets(512 << 10);

      // Pause in B: A stops sending; both tabs show it paused.
      await b.click('[data-testid="draft-toggle"][data-action="pause"]');
      await a.waitForSelector('[data-testid="draft"][data-state="paused"]', { timeout: T.short });
      await snap(b, 'paused');
      // What the pointers hold now, to show the paused upload on a phone and
      // in dark mode at the end.
      const pausedState = await context.storageState();

      // Resume in A: it goes on from the server's offset, in whichever tab
      // gets the upload's lock first (B asks for it again when it sees the
      // resume, and may ask before A).
      const resumedPatch = nextPatchIn(context);
      await a.click('[data-testid="draft-toggle"][data-action="resume"]');
      const { page: driver, offset: resumedAt } = await resumedPatch;
      const [driverName, survivor, survivorName] = driver === a ? ['A', b, 'B'] : ['B', a, 'A'];
      t.diagnostic(`resumed in A; ${driverName} went on at byte ${resumedAt}`);
      assert.ok(resumedAt > 0, "resumed from the server's offset, not 0");
      await gatewayGets(512 << 10);

      // The tab that drives goes away mid-upload; the other, queued for the
      // upload's lock, takes it over.
      if (driver === b) shoot(a, 'survivor'); // the end state is the survivor's
      const takeover = nextPatch(survivor);
      await driver.close();
      const takenAt = await takeover;
      t.diagnostic(`${driverName} closed; ${survivorName} went on at byte ${takenAt}`);
      assert.ok(takenAt > resumedAt, `${survivorName} went on from the server's offset`);
      await gatewayGets(512 << 10);

      // The survivor loses the network for two seconds.
      const cdp = await context.newCDPSession(survivor);
      await cdp.send('Network.enable');
      await cdp.send('Network.emulateNetworkConditions', { offline: true, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
      await survivor.waitForFunction(() => navigator.onLine === false, null, { timeout: T.short });
      proxy.cut(); // what was on its way is lost
      const afterOutage = nextPatch(survivor);
      await new Promise((r) => setTimeout(r, 2000)); // the outage itself
      assert.notEqual(await survivor.getAttribute('[data-testid="draft"]', 'data-state'), 'failed', 'a lost network is not a failure');
      await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
      const backAt = await afterOutage;
      t.diagnostic(`back online; ${survivorName} went on at byte ${backAt}`);
      assert.ok(backAt > takenAt, "after the outage the upload went on from the server's offset");
      await survivor.waitForSelector('[data-testid="draft"][data-state="done"]', { timeout: T.long });

      const creations = tus.filter((r) => r.method === 'POST');
      assert.equal(creations.length, 1, `one upload created in all: ${JSON.stringify(tus)}`);
      const patches = tus.filter((r) => r.method === 'PATCH');
      assert.equal(patches.filter((r) => r.offset === '0').length, 1, `only the first PATCH started at 0: ${JSON.stringify(patches)}`);
      assert.equal(new Set(patches.map((r) => r.path)).size, 1, 'every PATCH went to that one upload');

      const taskId = await sendShown(survivor, '/attachments');
      await waitStatus(survivor, taskId, 'done');
      assert.equal(await answerText(survivor, taskId), `${NAME} ${SIZE} ${sha}`, "the engine's /attachments answer");
      assert.deepEqual(await sys.rows(`SELECT count(*) FROM uploads`), [['1']], 'one upload stored');
      await snap(survivor, 'survivor'); // now: the proxy it connects through closes below

      for (const [suffix, opts] of [
        ['paused-phone', { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true }],
        ['paused-dark', { colorScheme: 'dark' }],
      ]) {
        const ctx = await browser.newContext({ ...opts, storageState: pausedState });
        const p = await ctx.newPage();
        await openApp(p, base);
        await p.waitForSelector('[data-testid="draft"][data-state="paused"]', { timeout: T.short });
        await p.screenshot({ path: `${artifacts}/10-upload-tabs-network-${suffix}.png` });
        await ctx.close();
      }
    } finally {
      await proxy.close();
    }
  });
});
