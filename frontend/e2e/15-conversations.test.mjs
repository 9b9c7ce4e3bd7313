// Scenario 15: conversations people can manage (issue 11, item 3). Two tabs
// of one browser. New conversations get short clean titles (a directive as
// typed); a rename in A shows in B at once; B searches titles and message
// text (a snippet with the words marked); B deletes, after confirming, the
// conversation A has open with an answer running: the answer stops, its
// data goes, and A moves to a new conversation. The list is grouped by date
// and messages show their time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, artifacts, openApp, scenario, sel, send, sendShown, threeShots, waitStatus } from './harness.mjs';

const item = (id) => `[data-testid="conversation-item"][data-id="${id}"]`;
const titleOf = (page, id) => page.textContent(`${item(id)} .title`);

/** Opens the drawer on a phone-width page, so a screenshot shows the list. */
async function showList(p) {
  const narrow = await p.evaluate(() => innerWidth < 760);
  const open = await p.evaluate(() => document.getElementById('app').classList.contains('drawer-open'));
  if (narrow !== open) await p.click('[data-testid="menu-button"]');
  if (narrow) await p.waitForFunction(() => document.querySelector('.sidebar').getBoundingClientRect().left >= 0, null, { timeout: T.short });
}

/** Waits until the page shows the new, empty conversation (a view is drawn on the next frame), so sendShown counts from it. */
async function emptyShown(p) {
  await p.waitForFunction(() => document.querySelectorAll('[data-testid="message"]').length === 0, null, { timeout: T.short });
}

test('conversations: clean titles, rename and delete synced live, full-text search, date groups, times', { timeout: 180_000 }, async (t) => {
  await scenario('15-conversations', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const a = await context.newPage();
    shoot(a, 'A');
    await openApp(a, sys.base);
    const b = await context.newPage();
    shoot(b, 'B');
    await openApp(b, sys.base);

    const long = 'Tell me about **zebras** and why they have stripes, with a long explanation of everything';
    const first = await send(a, long);
    await waitStatus(a, first, 'done');
    const zebra = await a.evaluate(() => window.tether.conversationId);
    await a.waitForFunction((s) => document.querySelector(s)?.textContent.startsWith('Tell me about zebras'), `${item(zebra)} .title`, { timeout: T.short });
    const title = await titleOf(a, zebra);
    assert.ok([...title].length <= 48 && title.endsWith('…') && !title.includes('**'), `a short, clean title: ${JSON.stringify(title)}`);
    assert.equal(await b.waitForSelector(item(zebra), { timeout: T.short }).then(() => titleOf(b, zebra)), title, 'the same title in B');
    assert.match(await a.textContent(`${sel.user}[data-task-id="${first}"] [data-testid="message-time"]`), /^\d{1,2}:\d{2}( [AP]M)?$/, 'a message shows its time');

    await a.click('[data-testid="new-conversation"]');
    const running = await send(a, '/stream 300 30');
    const runConv = await a.evaluate(() => window.tether.conversationId);
    await a.waitForFunction((s) => document.querySelector(s)?.textContent === '/stream 300 30', `${item(runConv)} .title`, { timeout: T.short });

    // Rename in A; B sees it without reloading.
    await a.hover(item(zebra));
    await a.click(`${item(zebra)} [data-testid="conversation-menu"]`);
    await a.click(`${item(zebra)} [data-testid="rename-conversation"]`);
    await a.fill(`${item(zebra)} [data-testid="rename-input"]`, 'Zebra facts');
    await a.press(`${item(zebra)} [data-testid="rename-input"]`, 'Enter');
    await b.waitForFunction((s) => document.querySelector(s)?.textContent === 'Zebra facts', `${item(zebra)} .title`, { timeout: T.short });
    assert.equal(await sys.sql(`SELECT title FROM conversations WHERE id = '${zebra}'`), 'Zebra facts');

    // Search in B: by message text (with a snippet, the words marked), by title, and nothing.
    await b.fill('[data-testid="conversation-search"]', 'stripe');
    await b.waitForSelector(`[data-testid="search-result"][data-id="${zebra}"] [data-testid="search-snippet"] mark`, { timeout: T.short });
    assert.deepEqual(await b.$$eval('[data-testid="search-result"]', (els) => els.map((e) => e.dataset.id)), [zebra], 'one conversation mentions stripes');
    assert.match(await b.textContent('[data-testid="search-snippet"]'), /stripes/);
    await threeShots(b, '15-conversations-search', showList);
    await b.fill('[data-testid="conversation-search"]', 'zebra fa');
    await b.waitForFunction((id) => [...document.querySelectorAll('[data-testid="search-result"]')].map((e) => e.dataset.id).join() === id, zebra, { timeout: T.short });
    await b.fill('[data-testid="conversation-search"]', 'nothing-like-this');
    await b.waitForFunction(() => document.querySelector('[data-testid="search-note"]')?.textContent === 'No conversations match.', null, { timeout: T.short });
    await b.fill('[data-testid="conversation-search"]', '');
    await b.waitForSelector('[data-testid="conversation-list"]:visible', { timeout: T.short });
    await b.click(item(zebra)); // B looks at another conversation than the one it deletes

    // Delete, from B, the conversation A has open with its answer running: B asks first.
    await b.hover(item(runConv));
    await b.click(`${item(runConv)} [data-testid="conversation-menu"]`);
    await b.click(`${item(runConv)} [data-testid="delete-conversation"]`);
    await b.waitForSelector('[data-testid="delete-dialog"][open]', { timeout: T.short });
    await b.screenshot({ path: `${artifacts}/15-conversations-confirm.png` });
    await b.click('[data-testid="cancel-delete"]');
    assert.equal(await a.getAttribute(`${sel.assistant}[data-task-id="${running}"]`, 'data-status'), 'generating', 'cancelling the question deletes nothing');
    await b.click(`${item(runConv)} [data-testid="conversation-menu"]`);
    await b.click(`${item(runConv)} [data-testid="delete-conversation"]`);
    await b.click('[data-testid="confirm-delete"]');
    await a.waitForSelector(item(runConv), { state: 'detached', timeout: T.short });
    await a.waitForFunction((c) => window.tether.conversationId !== c, runConv, { timeout: T.short });
    await a.waitForFunction(() => document.querySelector('[data-testid="notice-text"]')?.textContent === 'This conversation was deleted.', null, { timeout: T.short });
    await b.waitForSelector(item(runConv), { state: 'detached', timeout: T.short });
    for (const table of ['conversations', 'messages', 'tasks']) {
      const col = table === 'conversations' ? 'id' : 'conversation_id';
      assert.equal(await sys.sql(`SELECT count(*) FROM ${table} WHERE ${col} = '${runConv}'`), '0', `no ${table} left`);
    }

    // Date groups: move the zebra conversation three days back and make one from yesterday.
    await a.click('[data-testid="new-conversation"]');
    await emptyShown(a);
    const y = await sendShown(a, 'Yesterday question');
    await waitStatus(a, y, 'done');
    const yConv = await a.evaluate(() => window.tether.conversationId);
    await sys.sql(`UPDATE conversations SET updated_at = now() - interval '3 days' WHERE id = '${zebra}'`);
    await sys.sql(`UPDATE conversations SET updated_at = now() - interval '1 day' WHERE id = '${yConv}'`);
    await a.click('[data-testid="new-conversation"]');
    await emptyShown(a);
    const today = await sendShown(a, '/stream 3 10');
    await waitStatus(a, today, 'done');
    await b.reload();
    await openApp(b, sys.base);
    const groups = await b.$$eval('[data-testid="conversation-group"]', (els) => els.map((e) => e.dataset.label));
    assert.deepEqual(groups, ['Today', 'Yesterday', 'Previous 7 days'], 'grouped by date');
    const order = await b.$$eval('[data-testid="conversation-item"]', (els) => els.map((e) => e.querySelector('.title').textContent));
    t.diagnostic(`list: ${JSON.stringify(order)}`);
    assert.deepEqual(order, ['/stream 3 10', 'Yesterday question', 'Zebra facts']);
    await threeShots(b, '15-conversations', showList);
  });
});
