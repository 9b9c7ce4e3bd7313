// Scenario 24: a URL per conversation (issue 24, item 2). Two conversations
// in one tab: the URL follows each open (`/c/<id>`, a new chat is `/`),
// without a reload; Back and Forward switch conversations with the right
// messages; the sidebar's entries are links (Ctrl+click opens a new tab on
// the conversation); a direct load of /c/<id> in a new page opens it, and F5
// there mid-answer resumes it to the exact text. A random UUID, another
// user's conversation and a non-UUID path show "not found" and none of the
// conversation's messages; "Start a new chat" leads out of it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { T, answerText, scenario, sel, send, streamText, threeShots, waitLoaded, waitStatus, waitTextAtLeast } from './harness.mjs';

const N = 300;
const item = (id) => `[data-testid="conversation-item"][data-id="${id}"]`;
const path = (p) => p.evaluate(() => location.pathname);
const waitPath = (p, want) => p.waitForFunction((w) => location.pathname === w, want, { timeout: T.short });
/** The task ids of the user messages the page shows. */
const shownTasks = (p) => p.$$eval(sel.user, (els) => els.map((e) => e.getAttribute('data-task-id')));
/** Waits until the page shows exactly these user messages (a view is drawn on the next frame). */
const waitShows = (p, ids) =>
  p.waitForFunction((want) => JSON.stringify([...document.querySelectorAll('[data-testid="message"][data-role="user"]')].map((e) => e.getAttribute('data-task-id'))) === JSON.stringify(want), ids, { timeout: T.short });

/** Waits for the not-found state, connected, and checks nothing of a conversation shows. */
async function waitNotFound(p, what) {
  await p.waitForSelector(sel.live, { timeout: T.long });
  await p.waitForSelector('[data-testid="not-found"]', { timeout: T.long });
  assert.match(await p.textContent('[data-testid="not-found"]'), /doesn’t exist or isn’t yours/, `${what}: says why`);
  assert.equal(await p.locator(sel.message).count(), 0, `${what}: no message shown`);
  assert.equal(await p.isVisible(sel.input), false, `${what}: no composer into a conversation that is not there`);
  assert.equal(await p.locator('[data-testid="conversation-item"][aria-current="page"]').count(), 0, `${what}: no conversation marked open`);
  assert.equal(await p.title(), 'Not found · Tether', `${what}: the title says so`);
}

test('a URL per conversation: pushed on open, Back/Forward, direct loads, F5 resumes, not found', { timeout: 240_000 }, async () => {
  await scenario('24-urls', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await page.goto(sys.base + '/');
    await waitLoaded(page);
    assert.equal(await path(page), '/', 'a new chat is /');

    // A: its first send gives it its address.
    const a1 = await send(page, 'first conversation, about apples');
    const convA = await page.evaluate(() => window.tether.conversationId);
    await waitPath(page, `/c/${convA}`);
    await waitStatus(page, a1, 'done');
    // B: New chat is / again, until its first send.
    await page.click('[data-testid="new-conversation"]');
    await waitPath(page, '/');
    await waitShows(page, []);
    const b1 = await send(page, 'second conversation, about bananas');
    const convB = await page.evaluate(() => window.tether.conversationId);
    assert.notEqual(convB, convA);
    await waitPath(page, `/c/${convB}`);
    await waitStatus(page, b1, 'done');

    // The entries are real links; a click opens A in place, no reload.
    await page.waitForSelector(item(convA), { timeout: T.short });
    assert.equal(await page.getAttribute(`${item(convA)} a`, 'href'), `/c/${convA}`, 'the entry links to its conversation');
    await page.evaluate(() => (window.__sameDocument = true));
    await page.click(`${item(convA)} a`);
    await waitPath(page, `/c/${convA}`);
    await waitShows(page, [a1]);
    await page.waitForSelector(`${item(convA)}[aria-current="page"]`, { timeout: T.short });
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'opened in place, without a reload');
    await threeShots(page, '24-urls-conversation');

    // Back and Forward: [/, /c/A, /, /c/B, /c/A].
    await page.goBack();
    await waitPath(page, `/c/${convB}`);
    await waitShows(page, [b1]);
    assert.equal(await page.evaluate(() => window.tether.conversationId), convB, 'Back opened B');
    await page.goBack();
    await waitPath(page, '/');
    await waitShows(page, []);
    assert.ok(![convA, convB].includes(await page.evaluate(() => window.tether.conversationId)), 'Back to / is a new chat');
    await page.goBack();
    await waitPath(page, `/c/${convA}`);
    await waitShows(page, [a1]);
    await page.goForward();
    await waitPath(page, '/');
    await waitShows(page, []);
    await page.goForward();
    await waitPath(page, `/c/${convB}`);
    await waitShows(page, [b1]);
    await page.goForward();
    await waitPath(page, `/c/${convA}`);
    await waitShows(page, [a1]);
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'Back and Forward never reloaded');

    // Ctrl+click on an entry is the browser's: a new tab on that conversation; this tab stays.
    const [tab] = await Promise.all([context.waitForEvent('page', { timeout: T.short }), page.click(`${item(convB)} a`, { modifiers: ['ControlOrMeta'] })]);
    await tab.waitForLoadState();
    await waitLoaded(tab);
    assert.equal(await path(tab), `/c/${convB}`, 'the new tab is on B');
    await waitShows(tab, [b1]);
    assert.equal(await path(page), `/c/${convA}`, 'the first tab stays on A');
    await waitShows(page, [a1]);
    await tab.close();

    // A direct load of /c/<id> (a bookmark) opens it, whatever the tab had open last.
    const direct = await context.newPage();
    shoot(direct, 'direct');
    await direct.goto(`${sys.base}/c/${convB}`);
    await waitLoaded(direct);
    await waitShows(direct, [b1]);
    assert.equal(await direct.evaluate(() => window.tether.conversationId), convB);
    await direct.waitForSelector(`${item(convB)}[aria-current="page"]`, { timeout: T.short });

    // F5 on /c/<id> mid-answer: the same task goes on to the exact text.
    const s = await send(direct, `/stream ${N} 20`);
    await waitTextAtLeast(direct, s, 60);
    await direct.reload();
    assert.equal(await path(direct), `/c/${convB}`, 'F5 keeps the URL');
    await waitLoaded(direct);
    assert.equal(await direct.evaluate(() => window.tether.conversationId), convB, 'F5 reopened B');
    await waitStatus(direct, s, 'done');
    assert.equal(await answerText(direct, s), streamText(N), 'final text exact after F5');
    assert.deepEqual(await shownTasks(direct), [b1, s]);
    assert.deepEqual(await sys.rows(`SELECT status, attempt FROM tasks WHERE id = '${s}'`), [['done', '1']], 'one task, attempt 1');

    // A random UUID: not found, nothing else shown.
    const stray = await context.newPage();
    shoot(stray, 'random');
    await stray.goto(`${sys.base}/c/${randomUUID()}`);
    await waitNotFound(stray, 'a random UUID');
    await threeShots(stray, '24-urls-not-found');

    // Another user's conversation (another browser context is another anonymous user).
    const other = await newContext();
    const theirs = await other.newPage();
    shoot(theirs, 'other-user');
    await theirs.goto(`${sys.base}/c/${convA}`);
    await waitNotFound(theirs, "another user's conversation");
    assert.ok(!(await theirs.content()).includes('apples'), "nothing of A's text on the page");
    assert.equal(await theirs.locator(item(convA)).count(), 0, 'A is not in their list');

    // A path that names nothing; Start a new chat leads out of it.
    for (const p of ['/c/not-a-uuid', '/c/']) {
      await theirs.goto(sys.base + p);
      await waitNotFound(theirs, p);
    }
    await theirs.click('[data-testid="not-found-new"]');
    await waitPath(theirs, '/');
    await theirs.waitForSelector('[data-testid="not-found"]', { state: 'hidden', timeout: T.short });
    await theirs.waitForSelector(sel.input, { timeout: T.short });
    const own = await send(theirs, 'a conversation of their own');
    const ownConv = await theirs.evaluate(() => window.tether.conversationId);
    await waitPath(theirs, `/c/${ownConv}`);
    await waitStatus(theirs, own, 'done');
    assert.notEqual(ownConv, convA);
  });
});
