// Scenario 3: two tabs of one browser (one user). A submission in tab A
// shows in tab B, message and streaming text; a cancel in B stops A.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, streamText, waitStatus, waitTextAtLeast } from './harness.mjs';

const N = 500;

test('two tabs: a submission in A streams in B, cancel in B stops A', { timeout: 180_000 }, async () => {
  await scenario('03-two-tabs', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const a = await context.newPage();
    shoot(a, 'A');
    await openApp(a, sys.base);
    const b = await context.newPage();
    shoot(b, 'B');
    await openApp(b, sys.base);
    const conv = await a.evaluate(() => window.tether.conversationId);
    assert.equal(await b.evaluate(() => window.tether.conversationId), conv, 'both tabs open the same conversation');

    const id = await send(a, `/stream ${N} 20`);
    // B shows the question and the answer streaming.
    await b.waitForSelector(`${sel.user}[data-task-id="${id}"]`, { timeout: T.short });
    assert.equal(await b.textContent(`${sel.user}[data-task-id="${id}"] [data-testid="message-content"]`), `/stream ${N} 20`);
    await waitTextAtLeast(b, id, 40);
    const early = (await answerText(b, id)).length;
    await waitTextAtLeast(b, id, early + 40);
    assert.ok(streamText(N).startsWith(await answerText(b, id)), 'B streams the exact text');
    // The sidebar of B marks the conversation as running.
    await b.waitForSelector(`[data-testid="conversation-item"][data-id="${conv}"][data-running="true"]`, { timeout: T.short });

    await b.click(`${sel.assistant}[data-task-id="${id}"] [data-testid="cancel-button"]`);
    await waitStatus(a, id, 'cancelled', T.short);
    await waitStatus(b, id, 'cancelled', T.short);
    const atCancel = await answerText(a, id);
    // Not a synchronisation: a window in which a stream still running would
    // add about 50 deltas (one per 20 ms). The text must not move.
    await new Promise((r) => setTimeout(r, 1000));
    const textA = await answerText(a, id);
    const textB = await answerText(b, id);
    assert.equal(textA, atCancel, 'A stopped growing');
    assert.equal(textB, textA, 'both tabs show the same text');
    assert.ok(textA.length > 0 && textA.length < streamText(N).length && streamText(N).startsWith(textA), `a proper prefix (${textA.length} chars)`);

    assert.deepEqual(await sys.rows(`SELECT id, status, attempt FROM tasks WHERE conversation_id = '${conv}'`), [[id, 'cancelled', '1']], 'one task, cancelled');
    const stored = await sys.sql(`SELECT length(content) FROM messages WHERE task_id = '${id}' AND role = 'assistant' AND status = 'cancelled'`);
    assert.equal(Number(stored), textA.length, 'the stored answer is what the tabs show');
    assert.equal(await sys.sql(`SELECT count(*) FROM messages WHERE conversation_id = '${conv}'`), '2', 'two messages');
    // Neither tab offers a cancel any more, and both can send again.
    for (const p of [a, b]) {
      assert.equal(await p.isVisible(`${sel.assistant}[data-task-id="${id}"] [data-testid="cancel-button"]`), false);
      await p.waitForSelector('[data-testid="composer"][data-busy="false"]', { timeout: T.short });
      await p.waitForSelector(`[data-testid="conversation-item"][data-id="${conv}"][data-running="false"]`, { timeout: T.short });
    }
  });
});
