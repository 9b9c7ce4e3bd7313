// Scenario 1: F5 in the middle of a long answer. The same task continues,
// the progress bar resumes from the snapshot (never from 0), the final text
// is exact, and the database holds one task and two messages.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, progressOf, scenario, sel, send, streamText, waitLoaded, waitStatus } from './harness.mjs';

const N = 300;

test('F5 mid-answer: same task continues, progress resumes, text exact, stored once', { timeout: 180_000 }, async (t) => {
  await scenario('01-reload-mid-stream', {}, async ({ sys, newContext, shoot, snap }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);

    const id = await send(page, `/stream ${N} 20`);
    const conv = await page.evaluate(() => window.tether.conversationId);
    // Wait until it is well under way, then read where it is.
    await page.waitForFunction(
      (id) => Number(document.querySelector(`[data-role="assistant"][data-task-id="${id}"] [data-testid="progress"]`)?.getAttribute('data-value') ?? 0) >= 20,
      id,
      { timeout: T.long },
    );
    const before = await progressOf(page, id);
    const textBefore = await answerText(page, id);
    assert.ok(before >= 20 && before < 100, `progress before reload: ${before}`);
    assert.ok(streamText(N).startsWith(textBefore), 'text before reload is a prefix of the answer');

    await page.reload();
    // The pointer survived and names the same task.
    const active = await page.evaluate(() => JSON.parse(window.localStorage.getItem('tether.v1.active') ?? 'null'));
    assert.equal(active?.task_id, id, 'active pointer after reload');
    // The first value the bar ever showed after the reload (recorded by the
    // page's MutationObserver from the first moment) is the snapshot's.
    const first = await page.waitForFunction((id) => window.__progress.find((p) => p.task === id)?.value, id, { timeout: T.long });
    const firstValue = await first.jsonValue();
    await snap(page, 'after-reload');
    assert.ok(firstValue >= before, `progress after reload starts at ${firstValue}, was ${before} before`);
    assert.ok(firstValue > 0, 'never from 0');
    const seen = await page.evaluate(() => window.__progress.map((p) => p.value));
    t.diagnostic(`progress ${before} before the reload; after it the bar showed ${seen.slice(0, 5).join(', ')}, ...`);
    assert.ok(!seen.includes(0), `the bar never showed 0 after the reload: ${seen.slice(0, 10).join(',')}...`);
    // The text generated before the reload is there again, and it goes on.
    const textAfter = await answerText(page, id);
    assert.ok(textAfter.startsWith(textBefore), 'text after reload keeps what was shown before');
    await waitLoaded(page);
    assert.equal(await page.locator(sel.assistant).count(), 1, 'one answer in the view');

    await waitStatus(page, id, 'done');
    assert.equal(await answerText(page, id), streamText(N), 'final text exact');
    const progressValues = await page.evaluate((id) => window.__progress.filter((p) => p.task === id).map((p) => p.value), id);
    for (let i = 1; i < progressValues.length; i++) assert.ok(progressValues[i] >= progressValues[i - 1], `progress went back: ${progressValues.join(',')}`);
    assert.equal(await page.locator(sel.user).count(), 1, 'one user message in the view');

    const tasks = await sys.rows(`SELECT id, status, attempt FROM tasks WHERE conversation_id = '${conv}'`);
    assert.deepEqual(tasks, [[id, 'done', '1']], 'exactly one task, done, attempt 1');
    const msgs = await sys.rows(`SELECT role, status, task_id FROM messages WHERE conversation_id = '${conv}' ORDER BY created_at, id`);
    assert.deepEqual(msgs, [['user', '', id], ['assistant', 'done', id]], 'exactly two messages');
    const stored = await sys.sql(`SELECT length(content) || ':' || content FROM messages WHERE task_id = '${id}' AND role = 'assistant'`);
    assert.equal(stored, `${streamText(N).length}:${streamText(N).trimEnd()}`, 'stored answer (the trailing space is counted by length)');
    // The pointer is cleared once the finished answer is shown.
    await page.waitForFunction(() => window.localStorage.getItem('tether.v1.active') === null, null, { timeout: T.short });
  });
});
