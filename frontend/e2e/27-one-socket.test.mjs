// Scenario 27: one socket per browser (issue 23, item 4). Four tabs of one
// browser share one WebSocket, held by the leader tab (a Web Lock) and
// carried to the others over a BroadcastChannel. An answer streams in every
// tab; the leader tab is closed mid-answer: another tab takes the lock, opens
// the one socket again, every tab subscribes again and ends with the exact
// text, token by token, none lost or doubled. Then F5 of a follower
// mid-answer behaves as it does with a socket of its own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, streamText, threeShots, waitLoaded, waitStatus, waitTextAtLeast, waitUntil } from './harness.mjs';

const N = 400;

/** Records every text the page shows for the answer taskId, and whether one ever was not a prefix of the whole, or shrank. */
const watch = (page, taskId, n) =>
  page.evaluate(
    ({ id, n }) => {
      let whole = '';
      for (let i = 1; i <= n; i++) whole += `t${i} `;
      const rec = (window.__watch = { views: 0, notPrefix: [], shrank: [], last: 0 });
      window.tether.events.on('view', (v) => {
        const m = v.messages.find((x) => x.role === 'assistant' && x.task_id === id);
        if (!m) return;
        rec.views++;
        if (!whole.startsWith(m.content)) rec.notPrefix.push(m.content.slice(-40));
        if (m.content.length < rec.last) rec.shrank.push([rec.last, m.content.length]);
        rec.last = m.content.length;
      });
    },
    { id: taskId, n },
  );

/** The first token where text differs from t1 t2 … tn, or -1. */
function firstWrongToken(text, n) {
  const got = text.split(' ');
  if (got.at(-1) === '') got.pop();
  for (let i = 0; i < Math.max(got.length, n); i++) if (got[i] !== `t${i + 1}`) return i;
  return -1;
}

const isLeader = (p) => p.evaluate(() => window.tether.websocket.isLeader === true);
const connections = async (base) => {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = /^tether_gateway_connections (\d+)/m.exec(text);
  return m ? Number(m[1]) : null;
};

test('one socket per browser: four tabs, one WebSocket; the leader closes mid-answer and every tab ends exact', { timeout: 240_000 }, async (t) => {
  await scenario('27-one-socket', {}, async ({ sys, newContext, shoot, snap }) => {
    const context = await newContext();
    const sockets = [];
    context.on('page', (p) => p.on('websocket', (ws) => sockets.push({ page: p, url: ws.url() })));
    const tabs = [];
    for (const name of ['A', 'B', 'C', 'D']) {
      const p = await context.newPage();
      shoot(p, name);
      await openApp(p, sys.base);
      tabs.push({ name, page: p });
    }
    const [A, B, C, D] = tabs;
    // One socket for the four tabs, held by the first.
    assert.equal(sockets.length, 1, `one WebSocket for four tabs, saw ${sockets.length}`);
    assert.equal(sockets[0].page, A.page, 'the first tab holds it');
    assert.deepEqual(await Promise.all(tabs.map((x) => isLeader(x.page))), [true, false, false, false], 'A leads');
    await waitUntil(async () => (await connections(sys.base)) === 1, { what: 'the gateway counts one connection' });
    t.diagnostic(`4 tabs: ${sockets.length} WebSocket upgrade(s), gateway gauge tether_gateway_connections = ${await connections(sys.base)}`);
    for (const x of tabs) assert.equal(await x.page.textContent('[data-testid="connection"] .indicator-label'), 'Live', `${x.name} says Live`);

    // A follower submits (through the leader); every tab follows the answer.
    const id = await send(B.page, `/stream ${N} 20`);
    for (const x of tabs) await x.page.waitForSelector(`${sel.assistant}[data-task-id="${id}"]`, { timeout: T.short });
    const submitted = (p) => p.evaluate((id) => window.__sent.filter((m) => m.type === 'submit' && m.task_id === id).length, id);
    assert.equal(await submitted(B.page), 1, 'B sent the submit, to the leader');
    // A hears of it on the tab channel too and follows it; if its subscribe
    // came before the submit, it sends the same submit (same id) itself,
    // which the server deduplicates: as with a socket per tab.
    t.diagnostic(`submits of the answer, each tab's own: B ${await submitted(B.page)}, A (the leader) ${await submitted(A.page)}, C ${await submitted(C.page)}, D ${await submitted(D.page)}`);
    const carried = await A.page.evaluate(() => window.__carried);
    assert.ok(carried > 0, 'A carried the other tabs’ requests');
    t.diagnostic(`A sent ${carried} messages for the other tabs`);
    for (const x of [B, C, D]) await watch(x.page, id, N);
    for (const x of tabs) await waitTextAtLeast(x.page, id, 300);
    for (const x of [B, C, D]) assert.ok((await answerText(x.page, id)).length < streamText(N).length, `${x.name} is mid-answer`);

    // The leader tab closes mid-answer.
    await A.page.close();
    const rest = [B, C, D];
    await waitUntil(async () => (await Promise.all(rest.map((x) => isLeader(x.page)))).filter(Boolean).length === 1, { timeout: T.short, what: 'a new leader' });
    const leader = rest[(await Promise.all(rest.map((x) => isLeader(x.page)))).indexOf(true)];
    t.diagnostic(`tab ${leader.name} leads after A closed; upgrades so far: ${sockets.length}`);
    await waitUntil(() => sockets.length === 2, { timeout: T.short, what: 'the new leader opened the socket' });
    assert.equal(sockets[1].page, leader.page, 'the new leader holds the socket');
    for (const x of rest) await x.page.waitForSelector(sel.live, { timeout: T.long });

    for (const x of rest) await waitStatus(x.page, id, 'done', T.long);
    for (const x of rest) {
      const text = await answerText(x.page, id);
      assert.equal(firstWrongToken(text, N), -1, `${x.name}: token ${firstWrongToken(text, N) + 1} is wrong`);
      assert.equal(text, streamText(N), `${x.name} ends with the exact text`);
      const w = await x.page.evaluate(() => window.__watch);
      assert.ok(w.views > 10, `${x.name} drew the answer as it streamed (${w.views} views)`);
      assert.deepEqual(w.notPrefix, [], `${x.name} never showed a token doubled or out of place`);
      assert.deepEqual(w.shrank, [], `${x.name} never lost text it showed`);
      // The indicator told the truth: it left Live while no socket was open, and came back.
      const conn = await x.page.evaluate(() => window.__conn);
      assert.equal(conn.at(-1), 'live', `${x.name} ends Live (${conn.join(' → ')})`);
      t.diagnostic(`${x.name}: ${w.views} views of the answer; indicator ${conn.join(' → ')}`);
    }
    assert.deepEqual(await sys.rows(`SELECT status, attempt FROM tasks WHERE id = '${id}'`), [['done', '1']], 'one task, one attempt');
    await waitUntil(async () => (await connections(sys.base)) === 1, { what: 'one connection after the handover' });
    await snap(leader.page, 'after-handover');

    // F5 of a follower mid-answer.
    const follower = rest.find((x) => x !== leader);
    const id2 = await send(leader.page, `/stream ${N} 20`);
    await follower.page.waitForSelector(`${sel.assistant}[data-task-id="${id2}"]`, { timeout: T.short });
    await waitTextAtLeast(follower.page, id2, 300);
    const before = await answerText(follower.page, id2);
    assert.ok(before.length < streamText(N).length, 'F5 lands mid-answer');
    await follower.page.reload();
    await waitLoaded(follower.page);
    assert.equal(await isLeader(follower.page), false, 'the reloaded tab follows');
    for (const x of rest) await waitStatus(x.page, id2, 'done', T.long);
    for (const x of rest) assert.equal(await answerText(x.page, id2), streamText(N), `${x.name} ends exact after F5 of ${follower.name}`);
    assert.equal(sockets.length, 2, 'F5 of a follower opens no socket');
    assert.equal(await connections(sys.base), 1, 'still one connection');
    assert.equal(await sys.sql(`SELECT count(*) FROM tasks`), '2', 'two tasks, nothing re-sent');
    await threeShots(follower.page, '27-one-socket');
  });
});
