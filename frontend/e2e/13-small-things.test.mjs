// Scenario 13: the small things people notice (issue 11, item 6). The
// composer has the focus on load and after sending; Escape stops the answer,
// or closes the drawer when it is open; errors are said in plain words with
// the detail behind a disclosure; a screen reader hears answers in whole
// sentences, not token by token; and a reader who scrolled up while an
// answer streams stays where they are, with a button back to the newest.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, send, sendShown, threeShots, waitStatus, waitTextAtLeast } from './harness.mjs';

const focused = (page) => page.evaluate(() => document.activeElement?.getAttribute('data-testid'));

test('focus, Escape, plain-word errors, sentences for screen readers, scroll to the newest', { timeout: 180_000 }, async (t) => {
  await scenario('13-small-things', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);
    assert.equal(await focused(page), 'composer-input', 'the composer has the focus on load');

    // A failure, in plain words; the engine's message is behind "Details".
    const failed = await sendShown(page, '/fail 2 10');
    assert.equal(await focused(page), 'composer-input', 'the composer keeps the focus after sending');
    await waitStatus(page, failed, 'failed');
    const answer = `${sel.assistant}[data-task-id="${failed}"]`;
    assert.equal(await page.textContent(`${answer} [data-testid="error-text"]`), 'The assistant could not finish this answer. Try again.');
    assert.equal(await page.isVisible(`${answer} [data-testid="error-detail"]`), false, 'the detail is folded away');
    await page.click(`${answer} .error-more summary`);
    assert.equal(await page.textContent(`${answer} [data-testid="error-detail"]`), 'demo failure');
    assert.ok(await page.isVisible(`${answer} [data-testid="error-detail"]`), 'and shows when asked for');

    // A message over the limit is refused before it is sent, with the numbers.
    await page.fill(sel.input, 'x'.repeat(40000));
    await page.press(sel.input, 'Enter');
    await page.waitForSelector('[data-testid="notice"]:visible', { timeout: T.short });
    assert.equal(await page.textContent('[data-testid="notice-text"]'), 'This message is too long to send: 40,000 bytes, and the limit is 32,768. Shorten it or attach it as a file.');
    assert.equal((await page.inputValue(sel.input)).length, 40000, 'the text stays in the box');
    assert.equal(await page.evaluate(() => window.__sent.filter((m) => m.type === 'submit').length), 1, 'nothing was sent');
    await page.fill(sel.input, '');

    // Screen readers: the /markdown answer is announced in sentences and lines, not per chunk.
    const md = await send(page, '/markdown');
    await waitStatus(page, md, 'done');
    await page.waitForFunction(() => document.querySelector('[data-testid="announcer"]')?.textContent.includes('done.'), null, { timeout: T.short });
    const said = await page.$$eval('[data-testid="announcer"] p', (ps) => ps.map((p) => p.textContent));
    const events = Number(await sys.sql(`SELECT seq FROM tasks WHERE id = '${md}'`));
    t.diagnostic(`${said.length} announcements for ${events} events: ${JSON.stringify(said)}`);
    assert.ok(said.length >= 5 && said.length <= 30, `a handful of announcements (${said.length}), not one per chunk (${events} events)`);
    assert.ok(said.includes('Heading'), 'the heading is said alone');
    assert.ok(said.some((s) => s.startsWith('A paragraph with bold, italic, inline code and a link to Tether.')), 'a whole sentence, without markup');
    assert.equal(await page.getAttribute('[data-testid="message-list"]', 'aria-live'), null, 'the list itself is not re-read');

    // Escape stops the answer in progress.
    const long = await send(page, '/stream 400 20');
    await waitTextAtLeast(page, long, 30);
    await page.keyboard.press('Escape');
    await waitStatus(page, long, 'cancelled', T.short);
    assert.equal(await sys.sql(`SELECT status FROM tasks WHERE id = '${long}'`), 'cancelled');

    // Scrolled up while an answer streams: the view stays, the button brings it back.
    const stream = await send(page, '/stream 1500 8');
    await waitTextAtLeast(page, stream, 200);
    await page.$eval('[data-testid="message-list"]', (el) => el.scrollTo(0, 0));
    await page.waitForSelector('[data-testid="scroll-bottom"]:visible', { timeout: T.short });
    const top = await page.$eval('[data-testid="message-list"]', (el) => el.scrollTop);
    const len = (await answerText(page, stream)).length;
    await waitTextAtLeast(page, stream, len + 200);
    assert.equal(await page.$eval('[data-testid="message-list"]', (el) => el.scrollTop), top, 'the page did not pull the reader down');
    await threeShots(page, '13-small-things', (p) =>
      p.$eval('[data-testid="message-list"]', (el) => {
        el.scrollTo(0, 0);
        el.dispatchEvent(new Event('scroll'));
      }),
    );
    await page.setViewportSize({ width: 1100, height: 760 });
    await page.$eval('[data-testid="message-list"]', (el) => el.scrollTo(0, 0));
    await page.waitForSelector('[data-testid="scroll-bottom"]:visible', { timeout: T.short });
    await page.click('[data-testid="scroll-bottom"]');
    await page.waitForSelector('[data-testid="scroll-bottom"]', { state: 'hidden', timeout: T.short });
    const atBottom = () => page.$eval('[data-testid="message-list"]', (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 80);
    assert.ok(await atBottom(), 'back at the newest');
    const len2 = (await answerText(page, stream)).length;
    await waitTextAtLeast(page, stream, len2 + 200);
    assert.ok(await atBottom(), 'and it follows the answer again');
    await page.keyboard.press('Escape');
    await waitStatus(page, stream, 'cancelled', T.short);

    // At phone width, Escape closes the drawer and stops nothing.
    await page.setViewportSize({ width: 390, height: 844 });
    const next = await send(page, '/stream 300 20');
    await page.click('[data-testid="menu-button"]');
    await page.waitForFunction(() => document.getElementById('app').classList.contains('drawer-open'), null, { timeout: T.short });
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => !document.getElementById('app').classList.contains('drawer-open'), null, { timeout: T.short });
    assert.equal(await page.getAttribute(`${sel.assistant}[data-task-id="${next}"]`, 'data-status'), 'generating', 'closing the drawer did not stop the answer');
    await page.keyboard.press('Escape');
    await waitStatus(page, next, 'cancelled', T.short);
  });
});
