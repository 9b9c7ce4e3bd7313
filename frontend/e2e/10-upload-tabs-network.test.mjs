// Scenario 10: an upload outlives a pause, its tab and a lost network. Two
// tabs of one browser, behind a proxy that passes 1 MiB a second to the
// gateway; tab A starts a 12 MiB upload, tab B shows it. Then:
//   - pause in B: the upload stops in A (the pause is stored, every tab sees
//     it); resume in A: it goes on from the server's offset;
//   - A is closed mid-upload: B, which was queued for the upload's lock,
//     carries it on from the server's offset;
//   - B loses the network for two seconds (the browser is offline): the
//     upload waits and goes on from the server's offset when it is back.
// One upload is created in all, never restarted from zero, and the file
// that reaches the engine is byte for byte the one picked.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { T, answerText, artifacts, openApp, scenario, sendShown, startThrottleProxy, waitStatus, waitUntil } from './harness.mjs';

const SIZE = 12 << 20;
const NAME = 'capture.bin';

/** The next PATCH the page sends: its Upload-Offset. */
const nextPatch = (page) =>
  page.waitForRequest((r) => r.method() === 'PATCH' && new URL(r.url()).pathname.startsWith('/v1/uploads/'), { timeout: T.long }).then((r) => Number(r.headers()['upload-offset']));

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
      shoot(b, 'B');
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

      // Resume in A: it goes on from the server's offset.
      const resumedPatch = nextPatch(a);
      await a.click('[data-testid="draft-toggle"][data-action="resume"]');
      const resumedAt = await resumedPatch;
      t.diagnostic(`resumed in A at byte ${resumedAt}`);
      assert.ok(resumedAt > 0, "resumed from the server's offset, not 0");
      await gatewayGets(512 << 10);

      // Tab A goes away mid-upload; B, queued for the upload's lock, takes it over.
      const takeover = nextPatch(b);
      await a.close();
      const takenAt = await takeover;
      t.diagnostic(`A closed; B went on at byte ${takenAt}`);
      assert.ok(takenAt > resumedAt, "B went on from the server's offset");
      await gatewayGets(512 << 10);

      // B loses the network for two seconds.
      const cdp = await context.newCDPSession(b);
      await cdp.send('Network.enable');
      await cdp.send('Network.emulateNetworkConditions', { offline: true, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
      await b.waitForFunction(() => navigator.onLine === false, null, { timeout: T.short });
      proxy.cut(); // what was on its way is lost
      const afterOutage = nextPatch(b);
      await new Promise((r) => setTimeout(r, 2000)); // the outage itself
      assert.notEqual(await b.getAttribute('[data-testid="draft"]', 'data-state'), 'failed', 'a lost network is not a failure');
      await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
      const backAt = await afterOutage;
      t.diagnostic(`back online; B went on at byte ${backAt}`);
      assert.ok(backAt > takenAt, "after the outage the upload went on from the server's offset");
      await b.waitForSelector('[data-testid="draft"][data-state="done"]', { timeout: T.long });

      const creations = tus.filter((r) => r.method === 'POST');
      assert.equal(creations.length, 1, `one upload created in all: ${JSON.stringify(tus)}`);
      const patches = tus.filter((r) => r.method === 'PATCH');
      assert.equal(patches.filter((r) => r.offset === '0').length, 1, `only the first PATCH started at 0: ${JSON.stringify(patches)}`);
      assert.equal(new Set(patches.map((r) => r.path)).size, 1, 'every PATCH went to that one upload');

      const taskId = await sendShown(b, '/attachments');
      await waitStatus(b, taskId, 'done');
      assert.equal(await answerText(b, taskId), `${NAME} ${SIZE} ${sha}`, "the engine's /attachments answer");
      assert.deepEqual(await sys.rows(`SELECT count(*) FROM uploads`), [['1']], 'one upload stored');

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
