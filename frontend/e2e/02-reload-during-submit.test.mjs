// Scenario 2: F5 while the submit itself is in flight. A proxy between the
// browser and the gateway holds the WebSocket bytes on purpose, so the page
// reloads after the pointers are in localStorage but before the server has
// answered. Two cases:
//   - the submit reached the server, its answer did not reach the page: after
//     the reload the task is found (subscribe) and followed, never re-sent;
//   - the submit did not reach the server: after the reload it is re-sent with
//     the same id; then the old, delayed submit arrives too and changes nothing.
// Either way the task runs exactly once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, startHoldProxy, streamText, waitStatus, waitUntil } from './harness.mjs';

const N = 100;

async function assertRanOnce(sys, id, conv) {
  assert.deepEqual(await sys.rows(`SELECT id, status, attempt FROM tasks WHERE id = '${id}'`), [[id, 'done', '1']], 'one task row, done, attempt 1');
  assert.equal(await sys.sql(`SELECT count(*) FROM tasks WHERE conversation_id = '${conv}'`), '1', 'one task in the conversation');
  assert.deepEqual(
    await sys.rows(`SELECT role, coalesce(status, '-'), task_id FROM messages WHERE conversation_id = '${conv}' ORDER BY created_at, id`),
    [['user', '-', id], ['assistant', 'done', id]],
    'two messages',
  );
  // Created, claimed, finished: no second attempt, no second claim.
  assert.deepEqual(
    await sys.rows(`SELECT coalesce(from_status, ''), to_status, attempt FROM task_transitions WHERE task_id = '${id}' ORDER BY id`),
    [['', 'pending', '1'], ['pending', 'running', '1'], ['running', 'done', '1']],
    'transitions',
  );
}

test('F5 while the submit is in flight: found or re-sent with the same id, runs once', { timeout: 180_000 }, async (t) => {
  await scenario('02-reload-during-submit', {}, async ({ sys, newContext, shoot, snap }) => {
    const proxy = await startHoldProxy(sys.port);
    const base = `http://127.0.0.1:${proxy.port}`;
    try {
      await t.test('the answer is held: the task is found after the reload', async () => {
        const context = await newContext();
        const page = await context.newPage();
        shoot(page, 'answer-held');
        await openApp(page, base);
        assert.equal(proxy.hold('down'), 1, 'one WebSocket held');
        const id = await send(page, `/stream ${N} 20`);
        const conv = await page.evaluate(() => window.tether.conversationId);
        // The server has it; the page does not know yet.
        await waitUntil(async () => (await sys.sql(`SELECT count(*) FROM tasks WHERE id = '${id}'`)) === '1', { what: 'the task row' });
        assert.equal(await page.getAttribute(`${sel.user}[data-task-id="${id}"]`, 'data-status'), 'sending', 'the page still waits for the answer to its submit');
        const pending = await page.evaluate(() => JSON.parse(window.localStorage.getItem('tether.v1.pending') ?? '[]'));
        assert.deepEqual(pending.map((p) => p.task_id), [id], 'the submit is stored as pending');

        await page.reload();
        await waitStatus(page, id, 'done');
        assert.equal(await answerText(page, id), streamText(N), 'final text exact');
        const sent = await page.evaluate(() => window.__sent.filter((m) => m.task_id));
        assert.ok(sent.some((m) => m.type === 'subscribe' && m.task_id === id), 'the reloaded page looked the task up');
        assert.ok(!sent.some((m) => m.type === 'submit'), `the reloaded page did not re-send: ${JSON.stringify(sent)}`);
        assert.equal(await page.locator(sel.message).count(), 2, 'two messages shown');
        await assertRanOnce(sys, id, conv);
        await proxy.release('down');
        await snap(page, 'answer-held');
        await context.close();
      });

      await t.test('the submit is held: re-sent with the same id after the reload, the late one changes nothing', async () => {
        const context = await newContext();
        const page = await context.newPage();
        shoot(page, 'submit-held');
        await openApp(page, base);
        assert.equal(proxy.hold('up'), 1, 'one WebSocket held');
        const id = await send(page, `/stream ${N} 20`);
        const conv = await page.evaluate(() => window.tether.conversationId);
        const pending = await page.evaluate(() => JSON.parse(window.localStorage.getItem('tether.v1.pending') ?? '[]'));
        assert.deepEqual(pending.map((p) => p.task_id), [id], 'the submit is stored as pending before it is sent');
        assert.equal(await sys.sql(`SELECT count(*) FROM tasks WHERE id = '${id}'`), '0', 'the server has not seen it');

        await page.reload();
        // The reloaded page finds nothing and sends the stored submit again, same id.
        await page.waitForFunction((id) => window.__sent.some((m) => m.type === 'submit' && m.task_id === id), id, { timeout: T.long });
        await waitUntil(async () => (await sys.sql(`SELECT count(*) FROM tasks WHERE id = '${id}'`)) === '1', { what: 'the re-sent task row' });
        // Now the first submit arrives, late, on the connection the old page left.
        // The gateway counts submits by outcome; the late one must count as "existing".
        const submits = async () => {
          const body = await (await fetch(`${sys.base}/metrics`)).text();
          return Object.fromEntries([...body.matchAll(/^tether_gateway_submits_total\{outcome="(\w+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]));
        };
        const before = await submits();
        assert.equal(await proxy.deliverLate(), 1, 'the old connection delivered its submit');
        const after = await waitUntil(async () => {
          const c = await submits();
          return (c.existing ?? 0) > (before.existing ?? 0) ? c : null;
        }, { what: 'the late submit counted as existing', timeout: T.short });
        assert.deepEqual(after, { ...before, existing: (before.existing ?? 0) + 1 }, 'the late submit found the task and created nothing');
        await waitStatus(page, id, 'done');
        assert.equal(await answerText(page, id), streamText(N), 'final text exact');
        const resent = await page.evaluate(() => window.__sent.filter((m) => m.type === 'submit'));
        assert.equal(resent.length, 1, 'the reloaded page sent one submit');
        assert.deepEqual(resent[0], { ...resent[0], type: 'submit', task_id: id, conversation_id: conv, content: `/stream ${N} 20` }, 'same id, conversation and content');
        assert.equal(await page.locator(sel.message).count(), 2, 'two messages shown');
        await page.waitForFunction(() => window.localStorage.getItem('tether.v1.pending') === null, null, { timeout: T.short });
        await assertRanOnce(sys, id, conv);
      });
    } finally {
      await proxy.close();
    }
  });
});
