// Scenario 9: F5 in the middle of an upload. The browser sends a 6 MiB
// file at 2 MiB a second (its own network throttling, so the progress bar
// counts bytes that really left); the page reloads at about a third. After
// the reload the same upload carries on from the offset the server reports
// (HEAD, then a PATCH from there; no second upload is created), the file is
// attached to a message, the demo engine's /attachments answer names its
// size and SHA-256, and the chip on the sent message downloads the same
// bytes. A file dropped on the composer and removed again is deleted on the
// server.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { test } from 'node:test';
import { T, answerText, artifacts, openApp, scenario, sel, sendShown, waitLoaded, waitStatus, waitUntil } from './harness.mjs';

const SIZE = 6 << 20;
const NAME = 'field-notes 2026.bin';

/** Records every tus request a page makes: method, path and Upload-Offset. */
function recordTus(page, into) {
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (!u.pathname.startsWith('/v1/uploads')) return;
    into.push({ method: r.method(), path: u.pathname, offset: r.headers()['upload-offset'] ?? null });
  });
}

async function draftProgress(page) {
  return Number((await page.getAttribute('[data-testid="draft"] [data-testid="draft-progress"]', 'data-value')) ?? 0);
}

test('F5 during an upload: it resumes from the server offset and the file reaches the engine intact', { timeout: 240_000 }, async (t) => {
  await scenario('09-upload-reload', {}, async ({ sys, newContext, shoot, snap, browser }) => {
    const base = sys.base;
    const data = randomBytes(SIZE);
    const sha = createHash('sha256').update(data).digest('hex');
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    const tus = [];
    recordTus(page, tus);
    // The browser's own throttling (DevTools' network conditions): its
    // upload progress is then the bytes that left at that rate.
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 2 << 20 });
    await openApp(page, base);

    await page.setInputFiles('[data-testid="file-input"]', { name: NAME, mimeType: 'application/octet-stream', buffer: data });
    await page.waitForSelector('[data-testid="draft"][data-state="uploading"]', { timeout: T.short });
    // The composer waits for the upload: sending is not possible yet.
    await page.fill(sel.input, '/attachments');
    assert.equal(await page.isDisabled('[data-testid="send-button"]'), true, 'send waits for the upload');
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="draft-progress"]')?.getAttribute('data-value') ?? 0) >= 30, null, { timeout: T.long });
    const before = await draftProgress(page);
    const stored = JSON.parse(await page.evaluate(() => window.localStorage.getItem('tether.v1.uploads')));
    assert.equal(stored.length, 1, 'one draft stored');
    const url = stored[0].url;
    assert.match(url ?? '', /\/v1\/uploads\/[0-9a-f-]{36}$/, 'the upload URL is stored beside the task pointers');
    const id = url.slice(url.lastIndexOf('/') + 1);
    await snap(page, 'uploading');

    await page.reload();
    await waitLoaded(page);
    // The chip is back at once, from storage, not from zero.
    await page.waitForSelector(`[data-testid="draft"]`, { timeout: T.short });
    const first = await draftProgress(page);
    t.diagnostic(`progress ${before}% before the reload, ${first}% as the page came back`);
    assert.ok(first > 0, 'the progress after the reload does not start at 0');

    await page.waitForSelector('[data-testid="draft"][data-state="done"]', { timeout: T.long });
    // One upload, created once, resumed after the reload from where the server was.
    const creations = tus.filter((r) => r.method === 'POST');
    assert.equal(creations.length, 1, `one upload created: ${JSON.stringify(tus)}`);
    const patches = tus.filter((r) => r.method === 'PATCH');
    assert.ok(patches.length >= 2, `a PATCH before and after the reload: ${JSON.stringify(tus)}`);
    const resumed = patches[patches.length - 1];
    assert.equal(resumed.path, `/v1/uploads/${id}`, 'the same upload went on');
    assert.ok(Number(resumed.offset) > 0, `the PATCH after the reload starts at the server's offset (${resumed.offset}), not 0`);
    assert.ok(tus.some((r) => r.method === 'HEAD' && r.path === `/v1/uploads/${id}`), 'the offset came from HEAD');
    t.diagnostic(`resumed at byte ${resumed.offset} of ${SIZE}`);
    const [[received, finished, hash]] = await sys.rows(`SELECT received, finished_at IS NOT NULL, encode(sha256, 'hex') FROM uploads WHERE id = '${id}'`);
    assert.deepEqual([Number(received), finished, hash], [SIZE, 't', sha], 'the server has every byte, hashed');

    // Send it; the demo engine names the attachment's size and SHA-256.
    const taskId = await sendShown(page, '/attachments');
    await waitStatus(page, taskId, 'done');
    assert.equal(await answerText(page, taskId), `${NAME} ${SIZE} ${sha}`, "the engine's /attachments answer");
    assert.equal(await page.locator('[data-testid="draft"]').count(), 0, 'the composer is empty again');
    const chip = page.locator(`${sel.user}[data-task-id="${taskId}"] [data-testid="attachment-chip"]`);
    assert.equal(await chip.count(), 1, 'a chip on the sent message');
    assert.equal(await chip.getAttribute('data-id'), id);
    assert.deepEqual(
      await sys.rows(`SELECT m.role, u.position FROM uploads u JOIN messages m ON m.id = u.message_id WHERE u.id = '${id}'`),
      [['user', '0']],
      'attached to the user message',
    );

    // The chip downloads the same bytes, with the name.
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: T.long }), chip.click()]);
    assert.equal(download.suggestedFilename(), NAME);
    const file = await download.path();
    assert.equal(createHash('sha256').update(fs.readFileSync(file)).digest('hex'), sha, 'downloaded bytes');

    // A file can also be dropped on the composer, and taken out again: its
    // upload is deleted on the server and swept with its bytes.
    const dt = await page.evaluateHandle(() => {
      const d = new DataTransfer();
      d.items.add(new File(['dropped text\n'], 'dropped.txt', { type: 'text/plain' }));
      return d;
    });
    await page.dispatchEvent('[data-testid="composer"]', 'dragenter', { dataTransfer: dt });
    await page.dispatchEvent('[data-testid="composer"]', 'drop', { dataTransfer: dt });
    const dropped = page.locator('[data-testid="draft"][data-state="done"]');
    await dropped.waitFor({ timeout: T.short });
    const droppedId = await dropped.getAttribute('data-id');
    await page.click('[data-testid="draft-remove"]');
    await page.waitForSelector('[data-testid="draft"]', { state: 'detached', timeout: T.short });
    await waitUntil(async () => (await sys.sql(`SELECT count(*) FROM uploads WHERE id = '${droppedId}'`)) === '0', { what: 'the removed upload to be swept' });

    // After another reload the chip comes from history.
    await page.reload();
    await waitLoaded(page);
    await page.waitForSelector(`${sel.user}[data-task-id="${taskId}"] [data-testid="attachment-chip"][data-id="${id}"]`, { timeout: T.short });

    // The same end state on a phone and in dark mode, for the record.
    for (const [suffix, opts] of [
      ['phone', { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true }],
      ['dark', { colorScheme: 'dark' }],
    ]) {
      const ctx = await browser.newContext({ ...opts, storageState: await context.storageState() });
      const p = await ctx.newPage();
      await openApp(p, base);
      await p.waitForSelector('[data-testid="attachment-chip"]', { timeout: T.short });
      await p.screenshot({ path: `${artifacts}/09-upload-reload-${suffix}.png` });
      await ctx.close();
    }
  });
});
