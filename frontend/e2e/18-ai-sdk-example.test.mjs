// Scenario 18: the AI SDK example (examples/ai-sdk-chat), a React page on
// @ai-sdk/react's useChat with Tether's /v1/chat endpoints (PROTOCOL.md
// 11.3), served from an origin of its own and pointed at the gateway with
// ?gateway=. With the real SDK in Chromium: F5 mid-answer resumes the answer
// (GET .../stream replays it, then live); a second tab on the same URL shows
// the running answer; a runner SIGKILLed mid-answer has its answer continued,
// not regenerated; Stop cancels the task on the server. One task per turn,
// every text the page showed a prefix of the exact answer.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';
import { T, root, scenario, streamText, threeShots, waitUntil } from './harness.mjs';

const example = path.join(root, 'examples', 'ai-sdk-chat');
const dist = path.join(example, 'dist');

const assistant = '[data-testid="message"][data-role="assistant"]';

/** Builds the example when dist/ is missing or older than any of its sources. */
function ensureBuilt() {
  if (!fs.existsSync(path.join(example, 'node_modules', '.package-lock.json'))) {
    throw new Error('examples/ai-sdk-chat has no node_modules: run ./scripts/ensure-node-deps.sh');
  }
  const newest = (p) => {
    const st = fs.statSync(p);
    if (!st.isDirectory()) return st.mtimeMs;
    return Math.max(0, ...fs.readdirSync(p).map((f) => newest(path.join(p, f))));
  };
  const sources = ['src', 'index.html', 'vite.config.js', 'package.json', 'package-lock.json'].map((f) => newest(path.join(example, f)));
  const built = path.join(dist, 'index.html');
  if (fs.existsSync(built) && fs.statSync(built).mtimeMs >= Math.max(...sources)) return;
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: example, stdio: ['ignore', 'ignore', 'inherit'], timeout: 120_000 });
}

/** A static file server for dist/ on 127.0.0.1: the example's own origin. */
async function serveDist() {
  const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.json': 'application/json' };
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
    const file = path.resolve(dist, rel);
    if (!file.startsWith(dist + path.sep) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    fs.createReadStream(file).pipe(res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

// Runs in every page from the start of every load (F5 included): every text
// each assistant message shows, as painted, goes to the test (__sample).
const observeAnswers = () => {
  const last = new Map();
  const record = () => {
    for (const el of document.querySelectorAll('[data-testid="message"][data-role="assistant"]')) {
      const id = el.getAttribute('data-message-id');
      const text = el.querySelector('[data-testid="message-text"]')?.textContent ?? '';
      if (last.get(id) !== text) {
        last.set(id, text);
        window.__sample?.({ id, text, loadedAt: performance.timeOrigin });
      }
    }
  };
  new MutationObserver(record).observe(document, { subtree: true, childList: true, characterData: true });
};

/** Playwright's page.evaluate and response bodies wait without a deadline; these must not. */
function within(ms, what, promise) {
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms}ms waiting for ${what}`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const tokens = (s) => s?.match(/t\d+ /g)?.length ?? 0;
const messageIdOf = (taskId) => `msg_${taskId.replaceAll('-', '')}`;

test('AI SDK example: F5, a second tab, a killed runner and Stop, with the real useChat', { timeout: 300_000 }, async (t) => {
  ensureBuilt();
  const site = await serveDist();
  try {
    await scenario('18-ai-sdk-example', { runners: 2, env: { TETHER_LEASE: '2s', TETHER_ALLOWED_ORIGINS: site.origin } }, async ({ sys, newContext, shoot, snap }) => {
      const context = await newContext();
      // Every sample, in the order the pages painted them, with the page and
      // when the document that showed it was loaded.
      const samples = [];
      await context.exposeBinding('__sample', ({ page }, s) => samples.push({ page, ...s }));
      await context.addInitScript(observeAnswers);
      const streams = [];
      const histories = [];
      context.on('page', (p) => {
        p.on('response', async (r) => {
          const u = r.url();
          if (u.endsWith('/stream')) streams.push({ page: p, status: r.status() });
          if (u.endsWith('/messages')) histories.push({ page: p, body: await r.json().catch(() => null) });
        });
      });
      const samplesOf = (msgId, page) => samples.filter((s) => s.id === msgId && (!page || s.page === page));
      const prefixes = (msgId, final) => {
        const texts = samplesOf(msgId).map((s) => s.text);
        const bad = texts.find((x) => !final.startsWith(x));
        assert.equal(bad, undefined, `${msgId}: a shown text is not a prefix of the answer: ${JSON.stringify(bad?.slice(-80))}`);
        return texts;
      };

      const page = await context.newPage();
      shoot(page);
      await page.goto(`${site.origin}/?gateway=${encodeURIComponent(sys.base)}`);
      await page.waitForSelector('[data-testid="status"][data-status="ready"]', { timeout: T.long });
      const chatId = new URL(page.url()).searchParams.get('chat');
      assert.match(chatId ?? '', /^[0-9a-f-]{36}$/, 'the page put a new chat id in its URL');
      await waitUntil(() => streams.some((s) => s.page === page && s.status === 204), { timeout: T.short, what: 'the first GET .../stream answered 204' });

      const streamStatus = (p) =>
        within(T.short, 'GET .../stream', p.evaluate((u) => fetch(u, { credentials: 'include', signal: AbortSignal.timeout(10_000) }).then((r) => r.status), `${sys.base}/v1/chat/${chatId}/stream`));
      const turnTasks = () => sys.rows(`SELECT id, status, attempt FROM tasks WHERE conversation_id = '${chatId}' ORDER BY created_at`);
      /** Sends text, waits until the answer shows `atLeast` tokens; returns its task and message ids. */
      const sendTurn = async (p, text, atLeast) => {
        const before = (await turnTasks()).length;
        await p.fill('[data-testid="input"]', text);
        await p.click('[data-testid="send"]');
        const [[taskId]] = await waitUntil(async () => {
          const rows = await turnTasks();
          return rows.length > before ? rows.slice(before) : null;
        }, { timeout: T.short, what: 'the turn\'s task' });
        const msgId = messageIdOf(taskId);
        // The page's user message id (a UUID from generateId) is the idempotency key, so the task id.
        assert.equal(await p.locator(`[data-testid="message"][data-role="user"][data-message-id="${taskId}"]`).count(), 1, 'the user message is the task');
        await p.waitForFunction(({ id, n }) => (document.querySelector(`[data-message-id="${id}"] [data-testid="message-text"]`)?.textContent.match(/t\d+ /g)?.length ?? 0) >= n, { id: msgId, n: atLeast }, { timeout: T.long });
        return { taskId, msgId };
      };
      const textOf = (p, msgId) => p.evaluate((id) => document.querySelector(`[data-message-id="${id}"] [data-testid="message-text"]`)?.textContent ?? null, msgId);
      const waitText = (p, msgId, text) =>
        p.waitForFunction(({ id, text }) => document.querySelector(`[data-message-id="${id}"] [data-testid="message-text"]`)?.textContent === text, { id: msgId, text }, { timeout: T.long });
      const waitReady = (p) => p.waitForSelector('[data-testid="status"][data-status="ready"]', { timeout: T.long });

      // ---- 1. F5 mid-answer: the SDK resumes, the answer ends exact. --------------
      const one = await sendTurn(page, '/stream 200 20', 30);
      const reloadAt = Date.now();
      const shownAtReload = await textOf(page, one.msgId);
      await page.reload();
      await page.waitForFunction((id) => (document.querySelector(`[data-message-id="${id}"] [data-testid="message-text"]`)?.textContent.length ?? 0) > 0, one.msgId, { timeout: T.long });
      await snap(page, 'after-f5');
      await waitText(page, one.msgId, streamText(200));
      await waitReady(page);
      const afterReload = samplesOf(one.msgId, page).filter((s) => s.loadedAt >= reloadAt).map((s) => s.text);
      assert.ok(afterReload.some((x) => x.length < streamText(200).length && x.length > 0), 'after F5 the page showed the answer still streaming');
      prefixes(one.msgId, streamText(200));
      assert.ok(streams.some((s) => s.page === page && s.status === 200), 'the resumed GET .../stream streamed (200)');
      const hist = histories.filter((h) => h.page === page).at(-1)?.body;
      assert.equal(hist?.at(-1)?.metadata?.status, 'generating', 'after F5, /messages ended with the running answer (the page left it out)');
      assert.equal(await page.locator(assistant).count(), 1, 'one answer shown, not the history copy and the replay');
      assert.equal(await streamStatus(page), 204, 'nothing runs: GET .../stream is 204');
      t.diagnostic(`F5 at ${tokens(shownAtReload)} tokens; ${afterReload.length} texts after the reload`);

      // ---- 2. A second tab on the same URL shows the running answer. ---------------
      const two = await sendTurn(page, '/stream 200 20', 30);
      const tab2 = await context.newPage();
      await tab2.goto(page.url());
      await tab2.waitForFunction((id) => (document.querySelector(`[data-message-id="${id}"] [data-testid="message-text"]`)?.textContent.length ?? 0) > 0, two.msgId, { timeout: T.long });
      const tab2Early = await textOf(tab2, two.msgId);
      await snap(tab2, 'tab2');
      await waitText(page, two.msgId, streamText(200));
      await waitText(tab2, two.msgId, streamText(200));
      const tab2Texts = samplesOf(two.msgId, tab2).map((s) => s.text);
      assert.ok(tab2Texts.some((x) => x.length < streamText(200).length), 'the second tab showed the answer while it ran');
      prefixes(two.msgId, streamText(200));
      assert.equal(await textOf(tab2, one.msgId), streamText(200), 'the second tab shows the first turn from the history');
      assert.equal(await tab2.locator('[data-testid="message"]').count(), 4, 'the second tab shows both turns');
      await waitReady(tab2);
      await tab2.close();
      t.diagnostic(`second tab joined at ${tokens(tab2Early)} tokens, ${tab2Texts.length} texts`);

      // ---- 3. The runner answering is SIGKILLed: the answer is continued. ---------
      const three = await sendTurn(page, '/stream 300 20', 40);
      const [[holder, attempt]] = await sys.rows(`SELECT coalesce(runner_id, ''), attempt FROM tasks WHERE id = '${three.taskId}' AND status = 'running'`);
      const victim = sys.runners.find((r) => r.id === holder);
      assert.ok(victim, `the task is held by one of the runners (runner_id ${JSON.stringify(holder)})`);
      assert.equal(attempt, '1');
      process.kill(victim.pid, 'SIGKILL');
      await victim.exited;
      const atKill = await textOf(page, three.msgId);
      await waitText(page, three.msgId, streamText(300));
      await waitReady(page);
      const killTexts = prefixes(three.msgId, streamText(300));
      const shrinks = killTexts.filter((x, k) => k > 0 && x.length < killTexts[k - 1].length).length;
      assert.equal(shrinks, 0, 'the text never went back');
      assert.deepEqual(await sys.rows(`SELECT status, attempt FROM tasks WHERE id = '${three.taskId}'`), [['done', '2']], 'finished by attempt 2');
      t.diagnostic(`killed ${victim.name} at ${tokens(atKill)} tokens; ${killTexts.length} texts`);

      // ---- 4. Stop: the task is cancelled on the server and the text stays. -------
      const four = await sendTurn(page, '/stream 300 30', 30);
      const cancelled = page.waitForResponse((r) => r.url().endsWith(`/v1/chat/${chatId}/cancel`), { timeout: T.short });
      await page.click('[data-testid="stop"]');
      const cancelRes = await cancelled;
      assert.equal(cancelRes.status(), 200);
      assert.deepEqual(await within(T.short, "the cancel's body", cancelRes.json()), { cancelled: [four.taskId] }, 'the cancel names the running task');
      await waitUntil(async () => (await sys.sql(`SELECT status FROM tasks WHERE id = '${four.taskId}'`)) === 'cancelled', { timeout: T.short, what: 'the task cancelled' });
      await waitReady(page);
      const atCancel = await textOf(page, four.msgId);
      // A round trip to the gateway; a stream still going would have added text meanwhile.
      assert.equal(await streamStatus(page), 204, 'nothing runs after the cancel');
      const stillAfter = await textOf(page, four.msgId);
      assert.equal(stillAfter, atCancel, 'the text stopped growing');
      assert.ok(tokens(atCancel) >= 30 && atCancel.length < streamText(300).length && streamText(300).startsWith(atCancel), `a proper prefix (${tokens(atCancel)} tokens)`);
      const [stored] = (await sys.sql(`SELECT length(content) || ':' || content FROM messages WHERE task_id = '${four.taskId}' AND role = 'assistant' AND status = 'cancelled'`)).split('\n');
      const storedLen = Number(stored.slice(0, stored.indexOf(':')));
      const storedText = streamText(300).slice(0, storedLen);
      assert.equal(stored, `${storedLen}:${storedText.trimEnd()}`, 'the stored answer is a prefix of the demo text');
      assert.ok(storedText.startsWith(atCancel), `the page shows a prefix of what the server kept (${atCancel.length} <= ${storedLen})`);
      prefixes(four.msgId, streamText(300));
      assert.ok(await page.isVisible(`[data-message-id="${four.msgId}"] .note`), 'the answer says it was stopped');

      // ---- One task per turn; no attempt > 1 but the killed runner's. -------------
      assert.deepEqual(
        await turnTasks(),
        [
          [one.taskId, 'done', '1'],
          [two.taskId, 'done', '1'],
          [three.taskId, 'done', '2'],
          [four.taskId, 'cancelled', '1'],
        ],
        'four turns, four tasks',
      );

      // ---- The end state after one more F5: the history as the server has it. ----
      await page.reload();
      await waitReady(page);
      await waitText(page, four.msgId, storedText);
      for (const [turn, n] of [[one, 200], [two, 200], [three, 300]]) assert.equal(await textOf(page, turn.msgId), streamText(n));
      assert.equal(await page.locator('[data-testid="message"]').count(), 8);
      assert.equal(await page.textContent(`[data-message-id="${four.msgId}"] .note`), 'Stopped', 'the history knows it was stopped');
      assert.equal(await streamStatus(page), 204);
      await threeShots(page, '18-ai-sdk-example', (p) => p.evaluate(() => scrollTo(0, document.documentElement.scrollHeight)));
    });
  } finally {
    await site.close();
  }
});
