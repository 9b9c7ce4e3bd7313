// Scenario 16: no WebSocket, still the app (issue 11, item 5). Behind a
// proxy that refuses WebSocket upgrades, the page carries on over HTTP and
// Server-Sent Events: the list and history load, an answer streams exactly
// (and resumes with Last-Event-ID when its stream is cut), Stop works, F5
// mid-answer and a second tab behave as they do over WebSocket. When the
// proxy lets WebSocket through again, the page moves back to it. A browser
// without WebSocket at all gets the same.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, sendShown, startWsBlockingProxy, streamText, threeShots, waitLoaded, waitStatus, waitTextAtLeast } from './harness.mjs';

const live = (transport) => `[data-testid="connection"][data-state="live"][data-transport="${transport}"]`;

test('WebSocket blocked: the app works over HTTP and SSE, then goes back to WebSocket', { timeout: 240_000 }, async (t) => {
  await scenario('16-fallback', {}, async ({ sys, newContext, shoot, browser }) => {
    const proxy = await startWsBlockingProxy(sys.port);
    const base = `http://127.0.0.1:${proxy.port}`;
    try {
      const context = await newContext();
      const events = [];
      context.on('request', (r) => {
        const u = new URL(r.url());
        if (/^\/v1\/tasks\/[^/]+\/events$/.test(u.pathname)) events.push({ path: u.pathname, lastEventId: r.headers()['last-event-id'] ?? null });
      });
      const page = await context.newPage();
      shoot(page);
      const opened = Date.now();
      await page.goto(base + '/');
      await page.waitForSelector(live('http'), { timeout: T.long });
      await page.waitForSelector('[data-testid="message-list"][aria-busy="false"]', { timeout: T.short });
      const took = Date.now() - opened;
      t.diagnostic(`live over HTTP ${took} ms after the page was opened; ${proxy.refused()} upgrades refused`);
      assert.ok(proxy.refused() >= 2, 'WebSocket was tried first');
      assert.equal(await page.textContent('[data-testid="connection"] .indicator-label'), 'Live · HTTP');
      assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-testid')), 'composer-input', 'the app, ready to type in');

      // An answer streams over SSE, exactly; its stream is cut and resumes after the last seq.
      const N = 250;
      const id = await send(page, `/stream ${N} 20`);
      await waitTextAtLeast(page, id, 200);
      assert.deepEqual(events.filter((e) => e.path.includes(id)).map((e) => e.lastEventId), ['0'], 'the submitter follows from the seq of its task');
      proxy.cut();
      await waitTextAtLeast(page, id, 600);
      const resumes = events.filter((e) => e.path.includes(id)).slice(1);
      t.diagnostic(`stream resumed with Last-Event-ID ${JSON.stringify(resumes.map((e) => e.lastEventId))}`);
      assert.ok(resumes.length >= 1 && resumes.every((e) => e.lastEventId !== null && Number(e.lastEventId) > 0), 'resumed with Last-Event-ID');
      await threeShots(page, '16-fallback');

      // A second tab, and F5 mid-answer, over the fallback too.
      const other = await context.newPage();
      shoot(other, 'B');
      await other.goto(base + '/');
      await other.waitForSelector(live('http'), { timeout: T.long });
      await other.waitForSelector(`${sel.assistant}[data-task-id="${id}"]`, { timeout: T.short });
      await page.reload();
      await page.waitForSelector(live('http'), { timeout: T.long });
      await waitLoaded(page).catch(() => undefined);
      await waitStatus(page, id, 'done', T.long);
      await waitStatus(other, id, 'done', T.long);
      assert.equal(await answerText(page, id), streamText(N), 'final text exact after F5');
      assert.equal(await answerText(other, id), streamText(N), 'final text exact in the other tab');
      assert.deepEqual(await sys.rows(`SELECT status, attempt FROM tasks WHERE id = '${id}'`), [['done', '1']], 'one task, one attempt');

      // Stop, over HTTP.
      const stopped = await send(page, '/stream 400 20');
      await waitTextAtLeast(page, stopped, 40);
      await page.click(`${sel.assistant}[data-task-id="${stopped}"] [data-testid="cancel-button"]`);
      await waitStatus(page, stopped, 'cancelled', T.short);
      await waitStatus(other, stopped, 'cancelled', T.long);
      assert.equal(await sys.sql(`SELECT status FROM tasks WHERE id = '${stopped}'`), 'cancelled');

      // WebSocket is let through again: the page moves back to it by itself.
      await other.close();
      proxy.unblock();
      const back = Date.now();
      await page.waitForSelector(live('websocket'), { timeout: 90_000 });
      t.diagnostic(`back on WebSocket ${Date.now() - back} ms after it was let through`);
      const after = await sendShown(page, '/stream 30 10');
      await waitStatus(page, after, 'done');
      assert.equal(await answerText(page, after), streamText(30));
      assert.equal(events.filter((e) => e.path.includes(after)).length, 0, 'that answer came over WebSocket');

      // A browser without WebSocket at all.
      const bare = await browser.newContext();
      await bare.addInitScript(() => {
        delete window.WebSocket;
      });
      const p2 = await bare.newPage();
      await p2.goto(sys.base + '/');
      await p2.waitForSelector(live('http'), { timeout: T.long });
      const id2 = await sendShown(p2, '/stream 20 10');
      await waitStatus(p2, id2, 'done');
      assert.equal(await answerText(p2, id2), streamText(20));
      await bare.close();
    } finally {
      await proxy.close();
    }
  });
});
