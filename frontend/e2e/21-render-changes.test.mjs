// Scenario 21: an answer streams into a conversation that already has
// answers, and only what changed is drawn. The rows of the earlier messages
// stay the same DOM nodes from start to end and nothing inside them changes
// but the offers that depend on an answer being in progress (regenerate and
// edit are hidden while it runs, shown again at its end); the streaming row
// itself is the same node throughout; the final text is exact; the client
// sent fewer views than the answer had deltas (one a frame at most).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answerText, openApp, scenario, send, sendShown, streamText, waitStatus } from './harness.mjs';

const N = 3000;

test('streaming redraws only the answer: earlier rows keep their nodes, text exact', { timeout: 180_000 }, async () => {
  await scenario('21-render-changes', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);
    for (const n of [5, 8]) {
      const id = await sendShown(page, `/stream ${n} 0`);
      await waitStatus(page, id, 'done');
      assert.equal(await answerText(page, id), streamText(n));
    }

    // Mark every row there is, and record each change inside them from now on.
    await page.evaluate(() => {
      const list = document.querySelector('[data-testid="message-list"]');
      const rows = [...list.querySelectorAll('[data-testid="message"]')];
      rows.forEach((el, i) => (el.__mark = i));
      window.__render = { rows, changes: [], views: 0, answerRow: null };
      window.tether.events.on('view', () => window.__render.views++);
      new MutationObserver((muts) => {
        for (const m of muts) {
          const target = m.target.nodeType === 1 ? m.target : m.target.parentElement;
          const row = target?.closest('[data-testid="message"]');
          if (!row || row.__mark === undefined) continue;
          const what = target.closest('[data-testid]')?.getAttribute('data-testid') ?? target.tagName;
          window.__render.changes.push(`${what}:${m.type === 'attributes' ? m.attributeName : m.type}`);
        }
      }).observe(list, { subtree: true, childList: true, attributes: true, characterData: true });
    });

    const id = await send(page, `/stream ${N} 0`);
    await page.waitForSelector(`[data-testid="message"][data-role="assistant"][data-task-id="${id}"]`);
    await page.evaluate((id) => (window.__render.answerRow = document.querySelector(`[data-testid="message"][data-role="assistant"][data-task-id="${id}"]`)), id);
    await waitStatus(page, id, 'done');
    assert.equal(await answerText(page, id), streamText(N), 'the final text is exact');

    const r = await page.evaluate((id) => {
      const now = [...document.querySelectorAll('[data-testid="message"]')];
      return {
        kept: window.__render.rows.every((el) => el.isConnected && now.includes(el)),
        sameAnswerRow: window.__render.answerRow === document.querySelector(`[data-testid="message"][data-role="assistant"][data-task-id="${id}"]`),
        changes: [...new Set(window.__render.changes)].sort(),
        changeCount: window.__render.changes.length,
        views: window.__render.views,
        rows: now.length,
      };
    }, id);
    console.log(`21: ${N} deltas, ${r.views} views, ${r.changeCount} changes inside the earlier rows: ${r.changes.join(' ')}`);
    assert.equal(r.rows, 6, 'three questions and three answers');
    assert.ok(r.kept, 'the earlier rows are the same DOM nodes');
    assert.ok(r.sameAnswerRow, 'the streaming row is one node from its first delta to its end');
    const allowed = new Set(['regenerate-button:hidden', 'edit-button:hidden']);
    assert.deepEqual(r.changes.filter((c) => !allowed.has(c)), [], 'nothing else changed inside the earlier rows');
    assert.ok(r.views < N, `fewer views (${r.views}) than deltas (${N})`);
  });
});
