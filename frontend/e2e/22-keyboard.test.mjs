// Scenario 22: the keyboard (issue 24, items 3, 4 and 6), driven by keys
// alone where a keyboard user would. The conversation "…" menu is a WAI-ARIA
// menu button: aria-haspopup and aria-expanded on "…", role=menu with
// menuitems; opening focuses the first item, the arrows wrap, Home and End
// jump, Escape closes it back onto "…", Tab closes it, a click outside and
// choosing an item close it, and one menu is open at a time. The focus comes
// back to what opened it after a rename, the delete question (Escape, Cancel)
// and an edit (Escape, Cancel), and goes to a neighbour after a delete,
// never to <body>. Escape with a draft in the message box leaves the
// running answer alone (it streams to its exact end, `done`); with the box
// empty it is Stop's shortcut.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, sendShown, streamText, threeShots, waitStatus, waitTextAtLeast } from './harness.mjs';

const item = (id) => `[data-testid="conversation-item"][data-id="${id}"]`;
const dots = (id) => `${item(id)} [data-testid="conversation-menu"]`;

/** Waits until the focus is on the element with this test id (inside conversation id, when given). */
async function waitFocus(page, testid, id = null) {
  await page
    .waitForFunction(
      ([t, id]) => {
        const a = document.activeElement;
        return a?.getAttribute('data-testid') === t && (id === null || a.closest('[data-id]')?.getAttribute('data-id') === id);
      },
      [testid, id],
      { timeout: T.short },
    )
    .catch(async (err) => {
      const now = await page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.getAttribute('data-testid')}`);
      throw new Error(`focus not on ${testid} ${id ?? ''} (it is on ${now}): ${err.message}`);
    });
}

const expanded = (page, id) => page.getAttribute(dots(id), 'aria-expanded');
const openMenus = (page) => page.$$eval('.item-menu', (ms) => ms.filter((m) => !m.hidden).length);
const onBody = (page) => page.evaluate(() => document.activeElement === document.body || document.activeElement === null);

/** Before each screenshot: at phone width the drawer is shown (without a click, which would close the menu). */
async function drawerWhenNarrow(p) {
  const narrow = await p.evaluate(() => innerWidth < 760);
  await p.evaluate((n) => document.getElementById('app').classList.toggle('drawer-open', n), narrow);
  if (narrow) await p.waitForFunction(() => document.querySelector('.sidebar').getBoundingClientRect().left >= 0, null, { timeout: T.short });
}
const closeDrawer = (p) => p.evaluate(() => document.getElementById('app').classList.remove('drawer-open'));

test('keyboard: the conversation menu, focus that comes back, Escape never stops an answer over a draft', { timeout: 240_000 }, async (t) => {
  await scenario('22-keyboard', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);

    const a1 = await sendShown(page, '/stream 3 10');
    await waitStatus(page, a1, 'done');
    const c1 = await page.evaluate(() => window.tether.conversationId);
    await page.click('[data-testid="new-conversation"]');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="message"]').length === 0, null, { timeout: T.short });
    const a2 = await sendShown(page, 'Second question');
    await waitStatus(page, a2, 'done');
    const c2 = await page.evaluate(() => window.tether.conversationId);
    await page.waitForSelector(item(c1), { timeout: T.short });
    await page.waitForSelector(item(c2), { timeout: T.short });

    // --- Item 3: the menu button pattern. ---
    await page.focus(item(c1));
    await page.keyboard.press('Tab');
    await waitFocus(page, 'conversation-menu', c1);
    assert.equal(await page.getAttribute(dots(c1), 'aria-haspopup'), 'menu');
    assert.equal(await expanded(page, c1), 'false');
    const menuId = await page.getAttribute(dots(c1), 'aria-controls');
    assert.equal(await page.$eval(`#${menuId}`, (m) => [m.getAttribute('role'), m.hidden, [...m.querySelectorAll('button')].map((b) => b.getAttribute('role')).join()]).then((x) => x.join('|')), 'menu|true|menuitem,menuitem');

    await page.keyboard.press('Enter');
    await waitFocus(page, 'rename-conversation', c1);
    assert.equal(await expanded(page, c1), 'true', 'aria-expanded says it is open');
    assert.equal(await openMenus(page), 1);
    for (const [key, want] of [
      ['ArrowDown', 'delete-conversation'],
      ['ArrowDown', 'rename-conversation'], // wraps
      ['ArrowUp', 'delete-conversation'], // wraps
      ['Home', 'rename-conversation'],
      ['End', 'delete-conversation'],
    ]) {
      await page.keyboard.press(key);
      await waitFocus(page, want, c1);
    }
    await threeShots(page, '22-keyboard-menu', drawerWhenNarrow);
    await closeDrawer(page);
    await waitFocus(page, 'delete-conversation', c1);

    await page.keyboard.press('Escape');
    await waitFocus(page, 'conversation-menu', c1);
    assert.equal(await expanded(page, c1), 'false', 'Escape closes it');
    assert.equal(await openMenus(page), 0);

    await page.keyboard.press('Enter');
    await waitFocus(page, 'rename-conversation', c1);
    await page.keyboard.press('Tab');
    await page.waitForFunction((s) => document.querySelector(s).getAttribute('aria-expanded') === 'false', dots(c1), { timeout: T.short });
    assert.equal(await openMenus(page), 0, 'Tab closes it');
    assert.equal(await page.evaluate(() => !!document.activeElement.closest('.item-menu')), false, 'and the focus left it');
    assert.equal(await onBody(page), false, 'for the next control, not for nowhere');

    await page.focus(dots(c1));
    await page.keyboard.press('ArrowUp');
    await waitFocus(page, 'delete-conversation', c1);
    assert.equal(await expanded(page, c1), 'true', 'ArrowUp on "…" opens it on its last item');
    await page.keyboard.press('Escape');
    await waitFocus(page, 'conversation-menu', c1);
    await page.keyboard.press('ArrowDown');
    await waitFocus(page, 'rename-conversation', c1);
    await page.keyboard.press('Escape');
    await waitFocus(page, 'conversation-menu', c1);

    // One menu at a time, and a click outside closes it.
    await page.hover(item(c1));
    await page.click(dots(c1));
    await waitFocus(page, 'rename-conversation', c1);
    await page.click(dots(c2));
    await waitFocus(page, 'rename-conversation', c2);
    assert.equal(await expanded(page, c1), 'false', 'the first menu closed');
    assert.equal(await expanded(page, c2), 'true');
    assert.equal(await openMenus(page), 1, 'one menu open');
    await page.click('[data-testid="chat-title"]');
    await page.waitForFunction((s) => document.querySelector(s).getAttribute('aria-expanded') === 'false', dots(c2), { timeout: T.short });
    assert.equal(await openMenus(page), 0, 'a click outside closes it');

    // Choosing an item closes the menu; the rename's Escape gives the focus back to "…".
    await page.focus(dots(c1));
    await page.keyboard.press('Enter');
    await waitFocus(page, 'rename-conversation', c1);
    await page.keyboard.press('Enter');
    await waitFocus(page, 'rename-input', c1);
    assert.equal(await expanded(page, c1), 'false', 'choosing Rename closed the menu');
    assert.equal(await openMenus(page), 0);
    await page.keyboard.press('Escape');
    await waitFocus(page, 'conversation-menu', c1);
    assert.equal(await page.$(`${item(c1)} [data-testid="rename-input"]`), null);

    // --- Item 6: the delete question gives the focus back to "…". ---
    const askDelete = async () => {
      await page.focus(dots(c1));
      await page.keyboard.press('Enter');
      await waitFocus(page, 'rename-conversation', c1);
      await page.keyboard.press('End');
      await waitFocus(page, 'delete-conversation', c1);
      await page.keyboard.press('Enter');
      await page.waitForSelector('[data-testid="delete-dialog"][open]', { timeout: T.short });
      await waitFocus(page, 'cancel-delete');
    };
    await askDelete();
    await page.keyboard.press('Escape');
    await page.waitForSelector('[data-testid="delete-dialog"]:not([open])', { state: 'attached', timeout: T.short });
    await waitFocus(page, 'conversation-menu', c1);
    assert.equal(await expanded(page, c1), 'false');
    await threeShots(page, '22-keyboard-delete-escaped', drawerWhenNarrow);
    await closeDrawer(page);
    await waitFocus(page, 'conversation-menu', c1);

    await askDelete();
    await page.keyboard.press('Enter'); // on Cancel
    await page.waitForSelector('[data-testid="delete-dialog"]:not([open])', { state: 'attached', timeout: T.short });
    await waitFocus(page, 'conversation-menu', c1);

    await askDelete();
    await page.keyboard.press('Tab');
    await waitFocus(page, 'confirm-delete');
    await page.keyboard.press('Enter');
    await page.waitForSelector(item(c1), { state: 'detached', timeout: T.short });
    await waitFocus(page, 'conversation-item', c2);
    assert.equal(await sys.sql(`SELECT count(*) FROM conversations WHERE id = '${c1}'`), '0');
    assert.equal(await onBody(page), false);
    await threeShots(page, '22-keyboard-after-delete', drawerWhenNarrow);
    await closeDrawer(page);

    // --- Item 6: Escape and Cancel of an edit give the focus back to its Edit button. ---
    const edit = `${sel.user}[data-task-id="${a2}"] [data-testid="edit-button"]`;
    await page.focus(edit);
    await page.keyboard.press('Enter');
    await waitFocus(page, 'edit-input');
    await page.keyboard.press('Escape');
    await page.waitForSelector('[data-testid="edit-input"]', { state: 'detached', timeout: T.short });
    await waitFocus(page, 'edit-button');
    assert.equal(await page.evaluate(() => document.activeElement.closest('[data-testid="message"]').dataset.taskId), a2, 'the Edit button of that message');
    await threeShots(page, '22-keyboard-edit-escaped');
    await page.focus(edit);
    await page.keyboard.press('Enter');
    await waitFocus(page, 'edit-input');
    await page.keyboard.press('Tab');
    await waitFocus(page, 'edit-cancel');
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-testid="edit-input"]', { state: 'detached', timeout: T.short });
    await waitFocus(page, 'edit-button');

    // --- Item 4: Escape with a draft leaves the answer alone. ---
    const cancelsBefore = await page.evaluate(() => window.__sent.filter((m) => m.type === 'cancel').length);
    const long = await send(page, '/stream 400 20');
    await waitTextAtLeast(page, long, 30);
    await page.focus(sel.input);
    await page.keyboard.type('a draft');
    await page.keyboard.press('Escape');
    const after = (await answerText(page, long)).length;
    await waitTextAtLeast(page, long, after + 60);
    assert.equal(await page.getAttribute(`${sel.assistant}[data-task-id="${long}"]`, 'data-status'), 'generating', 'Escape over a draft stopped nothing');
    // Nor from elsewhere on the page while the draft is there.
    await page.focus('[data-testid="message-list"]');
    await page.keyboard.press('Escape');
    const after2 = (await answerText(page, long)).length;
    await waitTextAtLeast(page, long, after2 + 60);
    await waitStatus(page, long, 'done');
    assert.equal(await answerText(page, long), streamText(400), 'the answer streamed to its exact end');
    assert.equal(await sys.sql(`SELECT status FROM tasks WHERE id = '${long}'`), 'done');
    assert.equal(await page.evaluate(() => window.__sent.filter((m) => m.type === 'cancel').length), cancelsBefore, 'no cancel was sent');
    assert.equal(await page.inputValue(sel.input), 'a draft', 'the draft is still there');

    // With the box empty, Escape is Stop's shortcut.
    await page.fill(sel.input, '');
    const stopped = await send(page, '/stream 400 20');
    await waitTextAtLeast(page, stopped, 30);
    await waitFocus(page, 'composer-input');
    await page.keyboard.press('Escape');
    await waitStatus(page, stopped, 'cancelled', T.short);
    assert.equal(await sys.sql(`SELECT status FROM tasks WHERE id = '${stopped}'`), 'cancelled');
    t.diagnostic(`answer with a draft: ${streamText(400).length} characters, done; the empty-box Escape stopped ${stopped}`);
  });
});
