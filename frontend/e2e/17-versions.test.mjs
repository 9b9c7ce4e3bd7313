// Scenario 17: versions, as people know them from ChatGPT (issue 11, item
// 2). Regenerate an answer and edit a sent message: each is a new version of
// its turn (an idempotent submit with its own id and version_of), the earlier
// one stays, and ‹ 2/2 › moves between them; editing an earlier message
// starts a new branch, and going back to the first version brings back what
// followed it. Another tab hears of each version live; F5 keeps them all.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, sendShown, streamText, threeShots, waitStatus } from './harness.mjs';

const switcher = (id) => `${sel.assistant}[data-task-id="${id}"] [data-testid="version-switcher"]`;
const shown = (page) => page.$$eval('[data-testid="message"][data-role="assistant"]', (els) => els.map((e) => e.dataset.taskId));

/** The task id of the newest submit the page sent. */
const lastSubmit = (page) => page.evaluate(() => window.__sent.filter((m) => m.type === 'submit').at(-1));

test('regenerate and edit make versions with a ‹ n/m › switcher, synced to other tabs and kept over F5', { timeout: 180_000 }, async (t) => {
  await scenario('17-versions', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const a = await context.newPage();
    shoot(a, 'A');
    await openApp(a, sys.base);
    const b = await context.newPage();
    shoot(b, 'B');
    await openApp(b, sys.base);

    const one = await sendShown(a, '/stream 4 10');
    await waitStatus(a, one, 'done');
    const two = await sendShown(a, '/stream 3 10');
    await waitStatus(a, two, 'done');
    const conv = await a.evaluate(() => window.tether.conversationId);

    // Regenerate the second answer: a new version, shown, 2/2; the first stays in the database.
    await a.click(`${sel.assistant}[data-task-id="${two}"] [data-testid="regenerate-button"]`);
    const regen = await lastSubmit(a);
    assert.equal(regen.version_of, two, 'the regenerate names the turn it redoes');
    assert.equal(regen.content, '/stream 3 10', 'with the same message');
    const three = regen.task_id;
    await waitStatus(a, three, 'done');
    assert.deepEqual(await shown(a), [one, three], 'the new version replaces the old one on screen');
    await a.waitForSelector(`${switcher(three)}[data-index="2"][data-count="2"]`, { timeout: T.short });
    assert.equal(await a.textContent(`${switcher(three)} [data-testid="version-label"]`), '2/2');
    // The other tab hears of it and shows the same.
    await b.waitForSelector(`${switcher(three)}[data-index="2"][data-count="2"]`, { timeout: T.short });
    assert.deepEqual(await shown(b), [one, three]);

    // ‹ brings the first version back, › the second.
    await a.click(`${switcher(three)} [data-testid="version-prev"]`);
    await a.waitForSelector(`${switcher(two)}[data-index="1"][data-count="2"]`, { timeout: T.short });
    assert.deepEqual(await shown(a), [one, two]);
    assert.equal(await answerText(a, two), streamText(3), 'the earlier answer, as it was');
    await a.click(`${switcher(two)} [data-testid="version-next"]`);
    await a.waitForSelector(`${switcher(three)}[data-index="2"]`, { timeout: T.short });

    // Edit the first message and send it again: a new branch from the start.
    await a.click(`${sel.user}[data-task-id="${one}"] [data-testid="edit-button"]`);
    await a.fill(`${sel.user}[data-task-id="${one}"] [data-testid="edit-input"]`, '/stream 2 10');
    await a.click(`${sel.user}[data-task-id="${one}"] [data-testid="edit-send"]`);
    const edit = await lastSubmit(a);
    assert.equal(edit.version_of, one);
    const four = edit.task_id;
    await waitStatus(a, four, 'done');
    assert.deepEqual(await shown(a), [four], 'the edited turn, and nothing that followed the old one');
    assert.equal(await a.textContent(`${sel.user}[data-task-id="${four}"] [data-testid="message-content"]`), '/stream 2 10');
    await a.waitForSelector(`${switcher(four)}[data-index="2"][data-count="2"]`, { timeout: T.short });
    await b.waitForSelector(`${switcher(four)}[data-index="2"][data-count="2"]`, { timeout: T.short });
    await threeShots(a, '17-versions');
    // Back to the first version of the first turn: what followed it comes back, at its newest version.
    await a.click(`${switcher(four)} [data-testid="version-prev"]`);
    await a.waitForFunction((ids) => [...document.querySelectorAll('[data-testid="message"][data-role="assistant"]')].map((e) => e.dataset.taskId).join() === ids, [one, three].join(), { timeout: T.short });
    await threeShots(a, '17-versions-branch');

    // F5 keeps every version; the newest path shows.
    await a.reload();
    await openApp(a, sys.base).catch(() => undefined);
    await a.waitForSelector(`${switcher(four)}[data-count="2"]`, { timeout: T.short });
    assert.deepEqual(await shown(a), [four]);

    // Stored: four tasks, each turn placed.
    const rows = await sys.rows(`SELECT task_id, coalesce(parent_task_id::text, '-') FROM messages WHERE conversation_id = '${conv}' AND role = 'user' ORDER BY created_at, id`);
    assert.deepEqual(rows, [[one, '-'], [two, one], [three, one], [four, '-']], 'turns and the turn each follows');
    t.diagnostic(`turns: ${JSON.stringify(rows)}`);
    assert.equal(await sys.sql(`SELECT count(*) FROM tasks WHERE conversation_id = '${conv}'`), '4');
  });
});
