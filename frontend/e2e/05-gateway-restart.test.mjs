// Scenario 5: the web gateway restarts in the middle of an answer (NATS and
// the runner stay up). The indicator shows reconnecting, then live, and the
// answer continues and ends exact.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, streamText, waitStatus, waitTextAtLeast } from './harness.mjs';

const N = 400;

test('gateway restart mid-answer: reconnecting, live again, text exact', { timeout: 180_000 }, async (t) => {
  await scenario('05-gateway-restart', { separateNats: true }, async ({ sys, newContext, shoot, snap }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);

    const id = await send(page, `/stream ${N} 20`);
    const conv = await page.evaluate(() => window.tether.conversationId);
    await waitTextAtLeast(page, id, 100);
    const before = await answerText(page, id);

    await sys.stopGateway();
    await page.waitForSelector('[data-testid="connection"][data-state="reconnecting"]', { timeout: T.short });
    const whileDown = await answerText(page, id);
    await snap(page, 'reconnecting');
    assert.ok(whileDown.startsWith(before), 'the text stays while the gateway is away');
    await sys.startGateway();
    await page.waitForSelector(sel.live, { timeout: T.long });
    const states = await page.evaluate(() => window.__conn);
    const i = states.lastIndexOf('reconnecting');
    assert.ok(i > 0 && states.slice(0, i).includes('live') && states.slice(i).includes('live'), `indicator went live, reconnecting, live: ${states.join(' > ')}`);

    const atLive = await page.evaluate((id) => ({ status: document.querySelector(`[data-role="assistant"][data-task-id="${id}"]`)?.dataset.status, len: document.querySelector(`[data-role="assistant"][data-task-id="${id}"] [data-testid="message-content"]`)?.textContent.length }), id);
    t.diagnostic(`indicator: ${states.join(' > ')}; text before stop ${before.length} chars, when live again ${atLive.len} chars (${atLive.status}), full ${streamText(N).length}`);
    await waitStatus(page, id, 'done');
    assert.equal(await answerText(page, id), streamText(N), 'final text exact');
    // The text never shrank below what was shown before the restart.
    const lens = await page.evaluate((id) => window.__texts.filter((x) => x.task === id).map((x) => x.len), id);
    const dropAt = lens.findIndex((l, k) => k > 0 && l < lens[k - 1]);
    assert.equal(dropAt, -1, `the answer's text never got shorter (lengths around: ${lens.slice(Math.max(0, dropAt - 3), dropAt + 3).join(',')})`);
    assert.deepEqual(await sys.rows(`SELECT id, status, attempt FROM tasks WHERE conversation_id = '${conv}'`), [[id, 'done', '1']], 'one task, done, attempt 1');
    assert.equal(await sys.sql(`SELECT count(*) FROM messages WHERE conversation_id = '${conv}'`), '2', 'two messages');
    assert.equal(await page.locator(sel.message).count(), 2, 'two messages shown');
  });
});
