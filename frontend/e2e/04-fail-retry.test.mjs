// Scenario 4: a failing answer shows its error and a retry button; the retry
// is attempt 2 of the same task (same id), with no second task.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, streamText, waitStatus, waitUntil } from './harness.mjs';

test('/fail: error and retry; the retry is attempt 2 of the same task', { timeout: 180_000 }, async () => {
  await scenario('04-fail-retry', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);

    const id = await send(page, '/fail 3 50');
    const conv = await page.evaluate(() => window.tether.conversationId);
    const answer = `${sel.assistant}[data-task-id="${id}"]`;
    await waitStatus(page, id, 'failed');
    // In plain words, with the engine's own message behind a disclosure.
    assert.equal(await page.textContent(`${answer} [data-testid="error-text"]`), 'The assistant could not finish this answer. Try again.');
    assert.equal(await page.textContent(`${answer} [data-testid="error-detail"]`), 'demo failure');
    await page.waitForSelector(`${answer} [data-testid="retry-button"]:visible`, { timeout: T.short });
    assert.equal(await answerText(page, id), streamText(3), 'the text generated before the failure stays');
    assert.deepEqual(await sys.rows(`SELECT status, attempt, error FROM tasks WHERE id = '${id}'`), [['failed', '1', 'demo failure']]);
    // A failed task keeps its pointer, so a reload still offers the retry.
    assert.equal(await page.evaluate(() => JSON.parse(window.localStorage.getItem('tether.v1.active'))?.task_id), id);

    await page.click(`${answer} [data-testid="retry-button"]`);
    await waitUntil(async () => (await sys.sql(`SELECT status || '/' || attempt FROM tasks WHERE id = '${id}'`)) === 'failed/2', { what: 'attempt 2 failed' });
    await page.waitForFunction((id) => window.tether.taskState(id)?.task?.attempt === 2 && window.tether.taskState(id).task.status === 'failed', id, { timeout: T.short });
    await waitStatus(page, id, 'failed');
    await page.waitForSelector(`${answer} .meta:text("Failed (attempt 2)")`, { timeout: T.short });
    assert.equal(await page.textContent(`${answer} [data-testid="error-detail"]`), 'demo failure');
    await page.waitForSelector(`${answer} [data-testid="retry-button"]:visible`, { timeout: T.short });
    assert.equal(await answerText(page, id), streamText(3), 'attempt 2 streamed the same text, not appended to the first');

    const submits = await page.evaluate(() => window.__sent.filter((m) => m.type === 'submit').map((m) => [m.task_id, m.conversation_id, m.content]));
    assert.deepEqual(submits, [[id, conv, '/fail 3 50'], [id, conv, '/fail 3 50']], 'the retry re-sent the same id');
    assert.deepEqual(await sys.rows(`SELECT id, status, attempt, error FROM tasks WHERE conversation_id = '${conv}'`), [[id, 'failed', '2', 'demo failure']], 'one task, attempt 2');
    assert.deepEqual(
      await sys.rows(`SELECT role, coalesce(status, '-') FROM messages WHERE conversation_id = '${conv}' ORDER BY created_at, id`),
      [['user', '-'], ['assistant', 'failed']],
      'still two messages',
    );
    assert.deepEqual(
      await sys.rows(`SELECT coalesce(from_status, ''), to_status, attempt FROM task_transitions WHERE task_id = '${id}' ORDER BY id`),
      [['', 'pending', '1'], ['pending', 'running', '1'], ['running', 'failed', '1'], ['failed', 'pending', '2'], ['pending', 'running', '2'], ['running', 'failed', '2']],
      'transitions',
    );
    assert.equal(await page.locator(sel.message).count(), 2, 'two messages shown');
  });
});
