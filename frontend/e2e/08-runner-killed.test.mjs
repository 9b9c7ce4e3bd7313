// Scenario 8: the runner answering is killed (SIGKILL) in the middle of a long
// answer. Its lease runs out, the other runner takes the task as attempt 2 and
// continues the answer from the kept prefix (PROTOCOL.md section 3, keep). The
// page never shows a token twice or out of order, ends with the exact text,
// and says quietly that the answer was resumed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, assistantOf, openApp, scenario, sel, send, streamText, waitStatus, waitUntil } from './harness.mjs';

const N = 300;
const answerContent = (id) => `${sel.assistant}[data-task-id="${id}"] [data-testid="message-content"]`;

test('runner killed mid-answer: another runner continues it, text exact, nothing repeated, resumed note', { timeout: 180_000 }, async (t) => {
  await scenario('08-runner-killed', { runners: 2, env: { TETHER_LEASE: '2s' } }, async ({ sys, newContext, shoot, snap }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);

    // Every text the answer shows, as painted: the observer runs after each
    // batch of DOM changes, so it sees each state the user could have seen.
    await page.evaluate(() => {
      window.__answers = [];
      new MutationObserver(() => {
        for (const el of document.querySelectorAll('[data-testid="message"][data-role="assistant"] [data-testid="message-content"]')) {
          const task = el.closest('[data-task-id]')?.getAttribute('data-task-id') ?? null;
          const text = el.textContent;
          const last = window.__answers.findLast((a) => a.task === task);
          if (!last || last.text !== text) window.__answers.push({ task, text });
        }
      }).observe(document.querySelector('[data-testid="message-list"]'), { subtree: true, childList: true, characterData: true });
    });

    const id = await send(page, `/stream ${N} 20`);
    const conv = await page.evaluate(() => window.tether.conversationId);
    await page.waitForFunction((s) => (document.querySelector(s)?.textContent.match(/t\d+ /g)?.length ?? 0) >= 40, answerContent(id), { timeout: T.long });

    // The runner holding the task, by the id it holds the lease under.
    const [[holder, attempt]] = await sys.rows(`SELECT coalesce(runner_id, ''), attempt FROM tasks WHERE id = '${id}' AND status = 'running'`);
    const victim = sys.runners.find((r) => r.id === holder);
    assert.ok(victim, `the task is held by one of the runners (runner_id ${JSON.stringify(holder)})`);
    assert.equal(attempt, '1');
    const survivor = sys.runners.find((r) => r !== victim);
    process.kill(victim.pid, 'SIGKILL');
    await victim.exited;
    const atKill = await answerText(page, id);
    const tokensAtKill = atKill.match(/t\d+ /g)?.length ?? 0;
    assert.ok(tokensAtKill >= 40 && tokensAtKill < N, `killed ${victim.name} with ${tokensAtKill} tokens shown`);
    await snap(page, 'interrupted');

    // Attempt 2 starts on the other runner and the page says it resumed.
    const note = `${sel.assistant}[data-task-id="${id}"] [data-testid="resumed-note"]`;
    await page.waitForSelector(`${note}:visible`, { timeout: T.long });
    assert.equal(await page.textContent(note), 'Resumed after a server interruption');
    const atResume = await answerText(page, id);
    if ((await assistantOf(page, id).getAttribute('data-status')) === 'generating') await snap(page, 'resumed');

    await waitStatus(page, id, 'done');
    const final = await answerText(page, id);
    assert.equal(final, streamText(N), 'final text exact');
    assert.ok(await page.isVisible(note), 'the note stays on the finished answer');
    assert.equal(await page.evaluate((id) => window.tether.taskState(id)?.resumedAttempt, id), 2, 'attempt 2 started on the live stream with keep > 0');

    // Never a token twice or out of order: every text the page showed is a prefix of the answer.
    const texts = await page.evaluate((id) => window.__answers.filter((a) => a.task === id).map((a) => a.text), id);
    const expected = streamText(N);
    const bad = texts.findIndex((x) => !expected.startsWith(x));
    assert.equal(bad, -1, `a shown text is not a prefix of the answer: ${JSON.stringify(texts[bad]?.slice(-80))}`);
    // The text only shrinks where the new attempt truncated to what it kept (at most once, never to nothing).
    const shrinks = [];
    for (let k = 1; k < texts.length; k++) if (texts[k].length < texts[k - 1].length) shrinks.push([texts[k - 1].length, texts[k].length]);
    assert.ok(shrinks.length <= 1 && shrinks.every(([, to]) => to > 0), `the text shrank: ${JSON.stringify(shrinks)}`);
    const progress = await page.evaluate((id) => window.__progress.filter((p) => p.task === id).map((p) => p.value), id);
    const back = progress.findIndex((v, k) => k > 0 && v < progress[k - 1]);
    assert.equal(back, -1, `the progress bar went back: ${progress.slice(Math.max(0, back - 3), back + 3).join(',')}`);
    t.diagnostic(
      `killed ${victim.name} at ${tokensAtKill} tokens (${atKill.length} chars); resumed note shown at ${atResume.length} chars; ` +
        `${texts.length} texts sampled; shrinks ${JSON.stringify(shrinks)}; survivor ${survivor.name}`,
    );

    // One task, finished by attempt 2 after the lease of attempt 1 expired; two messages.
    assert.deepEqual(await sys.rows(`SELECT id, status, attempt FROM tasks WHERE conversation_id = '${conv}'`), [[id, 'done', '2']], 'one task, done, attempt 2');
    assert.deepEqual(
      await sys.rows(`SELECT coalesce(from_status, ''), to_status, attempt, reason FROM task_transitions WHERE task_id = '${id}' AND reason = 'lease_expired'`),
      [['running', 'pending', '2', 'lease_expired']],
      'attempt 2 came from the expired lease',
    );
    assert.deepEqual(
      await sys.rows(`SELECT role, coalesce(status, '-') FROM messages WHERE conversation_id = '${conv}' ORDER BY created_at, id`),
      [['user', '-'], ['assistant', 'done']],
      'two messages',
    );
    const stored = await sys.sql(`SELECT length(content) || ':' || content FROM messages WHERE task_id = '${id}' AND role = 'assistant'`);
    assert.equal(stored, `${expected.length}:${expected.trimEnd()}`, 'stored answer (the trailing space is counted by length)');
    assert.ok(survivor.running, 'the other runner is still up');
    await waitUntil(() => page.evaluate(() => window.localStorage.getItem('tether.v1.active') === null), { timeout: T.short, what: 'the active pointer cleared' });

    // The end state, on a desktop, in dark mode, and at phone width.
    await snap(page);
    await page.emulateMedia({ colorScheme: 'dark' });
    await snap(page, 'dark');
    await page.setViewportSize({ width: 390, height: 844 });
    // The sidebar slides away into its drawer; then show the end of the answer, as a phone user would see it.
    await page.waitForFunction(() => document.querySelector('.sidebar').getBoundingClientRect().right <= 0, null, { timeout: T.short });
    await page.evaluate(() => {
      const list = document.querySelector('[data-testid="message-list"]');
      list.scrollTop = list.scrollHeight;
    });
    assert.ok(await page.isVisible(note), 'the note shows at phone width');
    await snap(page, 'phone-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await snap(page, 'phone');
  });
});
