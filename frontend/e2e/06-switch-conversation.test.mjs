// Scenario 6: switch to another conversation while an answer is generated,
// then come back: it is still streaming or finished, and its text is never
// lost, not even for one frame.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, streamText, waitStatus, waitTextAtLeast } from './harness.mjs';

const N = 300;

test('switch conversations mid-answer and back: never lost, exact', { timeout: 180_000 }, async () => {
  await scenario('06-switch-conversation', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);

    const idA = await send(page, `/stream ${N} 20`);
    const convA = await page.evaluate(() => window.tether.conversationId);
    await waitTextAtLeast(page, idA, 60);
    await page.waitForSelector(`[data-testid="conversation-item"][data-id="${convA}"][data-running="true"]`, { timeout: T.short });

    const leftWith = await answerText(page, idA);
    await page.click('[data-testid="new-conversation"]');
    await page.waitForFunction((a) => window.tether.conversationId !== a, convA, { timeout: T.short });
    const convB = await page.evaluate(() => window.tether.conversationId);
    assert.equal(await page.locator(sel.message).count(), 0, 'the new conversation is empty');
    const idB = await send(page, 'hello there');
    await waitStatus(page, idB, 'done');
    const replyB = await answerText(page, idB);
    assert.ok(replyB.length > 0, 'B got an answer');
    assert.equal(await page.locator(`${sel.assistant}[data-task-id="${idA}"]`).count(), 0, "A's answer is not shown in B");

    // Back to A: everything rendered from now on must hold at least what A had.
    const mark = await page.evaluate(() => performance.now());
    const known = await page.evaluate((id) => window.tether.taskState(id)?.task?.output?.length ?? 0, idA);
    await page.click(`[data-testid="conversation-item"][data-id="${convA}"]`);
    await page.waitForSelector(`${sel.assistant}[data-task-id="${idA}"]`, { timeout: T.short });
    const shownBack = await answerText(page, idA);
    assert.ok(shownBack.length >= leftWith.length && shownBack.length >= known && streamText(N).startsWith(shownBack), `shown at once on return: ${shownBack.length} chars, the tab knew ${known}`);
    await waitStatus(page, idA, 'done');
    assert.equal(await answerText(page, idA), streamText(N), 'final text exact');
    const lens = await page.evaluate(({ id, mark }) => window.__texts.filter((x) => x.task === id && x.at >= mark).map((x) => x.len), { id: idA, mark });
    assert.ok(lens.length > 0, 'renders recorded');
    assert.ok(Math.min(...lens) >= known, `never rendered shorter than ${known} after coming back: min ${Math.min(...lens)}`);

    for (const [conv, id] of [[convA, idA], [convB, idB]]) {
      assert.deepEqual(await sys.rows(`SELECT id, status, attempt FROM tasks WHERE conversation_id = '${conv}'`), [[id, 'done', '1']], `one task in ${conv}`);
      assert.equal(await sys.sql(`SELECT count(*) FROM messages WHERE conversation_id = '${conv}'`), '2', `two messages in ${conv}`);
    }
    assert.equal(await page.locator(sel.message).count(), 2, 'two messages shown in A');
    assert.equal(await page.locator('[data-testid="conversation-item"]').count(), 2, 'two conversations listed');
  });
});
