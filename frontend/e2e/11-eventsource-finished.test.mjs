// Scenario 11: Chromium's own EventSource on a task's SSE stream. It follows
// the answer to its end with the exact text; then the server closes the
// stream, the browser reconnects once with Last-Event-ID at the terminal
// event, the gateway answers 204, and the EventSource stops (CLOSED) instead
// of reconnecting every few seconds forever. A second EventSource opened on
// the finished task gets its snapshot and stops the same way.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, openApp, scenario, send, streamText, waitStatus } from './harness.mjs';

const N = 40;

/** Opens an EventSource on the task in the page and records what it sees. */
async function follow(page, id) {
  await page.evaluate((id) => {
    const log = { opens: 0, errors: 0, ids: [], text: '', status: null, types: [] };
    const es = new EventSource(`/v1/tasks/${id}/events`);
    (window.__es ??= []).push({ es, log });
    es.addEventListener('open', () => log.opens++);
    es.addEventListener('error', () => log.errors++);
    es.addEventListener('snapshot', (e) => {
      log.types.push('snapshot');
      log.ids.push(e.lastEventId);
      const t = JSON.parse(e.data).task;
      log.text = t.output;
      log.status = t.status;
    });
    es.addEventListener('delta', (e) => {
      log.types.push('delta');
      log.ids.push(e.lastEventId);
      log.text += JSON.parse(e.data).text;
    });
    es.addEventListener('status', (e) => {
      log.types.push('status');
      log.ids.push(e.lastEventId);
      log.status = JSON.parse(e.data).status;
    });
  }, id);
  return (await page.evaluate(() => window.__es.length)) - 1;
}

const state = (page, i) => page.evaluate((i) => ({ readyState: window.__es[i].es.readyState, ...window.__es[i].log }), i);

test('EventSource: exact text, then 204 on the finished stream stops it reconnecting', { timeout: 180_000 }, async (t) => {
  await scenario('11-eventsource-finished', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    // Every request the browser makes for the stream, with its Last-Event-ID and answer.
    const requests = [];
    page.on('response', async (r) => {
      if (!r.url().includes('/events')) return;
      const h = await r.request().allHeaders();
      requests.push({ url: r.url(), lastEventId: h['last-event-id'] ?? null, status: r.status() });
    });
    await openApp(page, sys.base);

    const id = await send(page, `/stream ${N} 100`);
    const live = await follow(page, id);
    await waitStatus(page, id, 'done');
    // The stream ends; the browser comes back with Last-Event-ID; 204 closes it for good.
    await page.waitForFunction((i) => window.__es[i].es.readyState === 2, live, { timeout: T.long });
    const s = await state(page, live);
    t.diagnostic(`live EventSource: ${s.opens} open(s), ${s.types.length} events, requests ${JSON.stringify(requests)}`);
    assert.equal(s.text, streamText(N), 'the text the EventSource assembled is exact');
    assert.equal(s.status, 'done');
    assert.equal(s.opens, 1, 'opened once');
    const ofTask = requests.filter((r) => r.url.includes(id));
    assert.equal(ofTask.length, 2, `two requests: the stream and one resume (${JSON.stringify(ofTask)})`);
    assert.equal(ofTask[0].status, 200);
    assert.equal(ofTask[1].status, 204, 'the resume of the finished stream answers 204');
    assert.equal(ofTask[1].lastEventId, s.ids[s.ids.length - 1], 'the resume names the terminal event');

    // A new EventSource on the finished task: its snapshot, then the same stop.
    const late = await follow(page, id);
    await page.waitForFunction((i) => window.__es[i].es.readyState === 2, late, { timeout: T.long });
    const s2 = await state(page, late);
    assert.deepEqual(s2.types, ['snapshot'], 'a finished task streams its snapshot only');
    assert.equal(s2.text, streamText(N));

    // And they stay closed: nothing more is asked of the gateway.
    const before = requests.length;
    await new Promise((r) => setTimeout(r, 7_000)); // more than two of Chromium's 3 s reconnect delays
    assert.equal(requests.length, before, `no reconnect after 204 (${JSON.stringify(requests.slice(before))})`);
    for (const i of [live, late]) assert.equal((await state(page, i)).readyState, 2, 'still CLOSED');
    assert.equal(requests.filter((r) => r.url.includes(id)).length, 4, 'two requests per EventSource, in all');
  });
});
