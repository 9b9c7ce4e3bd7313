// Scenario 7: a conversation longer than one history page. After a reload
// the newest page shows; scrolling up loads the older pages, in order, with
// no duplicates, until the start of the conversation.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { T, openApp, scenario, sel, streamText, waitUntil } from './harness.mjs';

const COUNT = 60; // 120 messages: more than two pages of 50

test('history: older pages load on scroll up, in order, no duplicates', { timeout: 180_000 }, async () => {
  await scenario('07-history-paging', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);
    const conv = await page.evaluate(() => window.tether.conversationId);

    // Submitted over HTTP with the page's own cookie (page.request shares the
    // context's cookies), one after another: /stream i 0 answers t1 .. ti.
    const ids = [];
    for (let i = 1; i <= COUNT; i++) {
      const id = randomUUID();
      const r = await page.request.post(`${sys.base}/v1/tasks`, {
        data: { task_id: id, conversation_id: conv, content: `/stream ${i} 0` },
        headers: { Origin: sys.base },
      });
      assert.equal(r.status(), 201, `submit ${i}: ${await r.text()}`);
      ids.push(id);
    }
    await waitUntil(async () => (await sys.sql(`SELECT count(*) FROM tasks WHERE conversation_id = '${conv}' AND status = 'done'`)) === String(COUNT), { what: `${COUNT} tasks done` });

    await page.reload();
    await page.waitForSelector(sel.live, { timeout: T.long });
    await page.waitForSelector('[data-testid="message-list"][aria-busy="false"]', { timeout: T.long });
    // The newest page first: fewer than all, more to load.
    const first = await page.locator(sel.message).count();
    assert.ok(first > 0 && first < 2 * COUNT, `first render shows one page (${first} messages)`);
    assert.equal(await page.getAttribute('[data-testid="history-top"]', 'data-state'), 'more');

    // Scroll to the top until the start of the conversation shows.
    const loads = [];
    for (let round = 0; round < 10; round++) {
      const state = await page.getAttribute('[data-testid="history-top"]', 'data-state');
      if (state === 'start') break;
      const count = await page.locator(sel.message).count();
      await page.locator('[data-testid="message-list"]').evaluate((el) => el.scrollTo(0, 0));
      await page.waitForFunction(
        (count) => document.querySelectorAll('[data-testid="message"]').length > count && document.querySelector('[data-testid="history-top"]').getAttribute('data-state') !== 'loading',
        count,
        { timeout: T.short },
      );
      loads.push(await page.locator(sel.message).count());
    }
    assert.equal(await page.getAttribute('[data-testid="history-top"]', 'data-state'), 'start', `reached the start after loads ${loads.join(', ')}`);
    assert.ok(loads.length >= 1, 'at least one older page loaded on scroll');

    const shown = await page.$$eval(sel.message, (els) =>
      els.map((e) => ({ id: e.dataset.id, role: e.dataset.role, task: e.dataset.taskId, status: e.dataset.status, text: e.querySelector('[data-testid="message-content"]').textContent })),
    );
    assert.equal(shown.length, 2 * COUNT, 'every message, once');
    assert.equal(new Set(shown.map((m) => m.id)).size, shown.length, 'no duplicate message ids');
    for (let i = 0; i < COUNT; i++) {
      const [u, a] = [shown[2 * i], shown[2 * i + 1]];
      assert.deepEqual([u.role, u.task, u.text], ['user', ids[i], `/stream ${i + 1} 0`], `message ${2 * i} in order`);
      // Answers are rendered Markdown: a paragraph, without the trailing space.
      assert.deepEqual([a.role, a.task, a.status, a.text], ['assistant', ids[i], 'done', streamText(i + 1).trimEnd()], `message ${2 * i + 1} in order`);
    }
    // Older pages went in front without moving what was on screen; at the very top is the first question.
    await page.locator('[data-testid="message-list"]').evaluate((el) => el.scrollTo(0, 0));
    await page.waitForFunction(() => {
      const list = document.querySelector('[data-testid="message-list"]').getBoundingClientRect();
      const first = document.querySelector('[data-testid="message"]').getBoundingClientRect();
      return first.top >= list.top && first.bottom <= list.bottom;
    }, null, { timeout: T.short });
    assert.equal(await page.locator(sel.message).count(), 2 * COUNT, 'scrolling to the top again loads nothing more');
  });
});
