// Scenario 26: the first screen helps a newcomer (issue 24, item 7). A fresh
// browser sees example prompts (the demo commands among them) and "No
// conversations yet"; an example fills the message box and sends like typed
// text. A CJK draft of 11,000 characters (33,000 bytes) shows the byte
// counter near the limit and its error past it, with Send disabled; "Attach
// as a file" turns it into message.txt, uploaded with tus, whose bytes the
// demo engine's /attachments answer proves exact. At phone width the header
// has New chat. The theme button goes System → Light → Dark, holds over the
// system's preference, is applied before the UI draws, survives a reload and
// reaches another tab.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { T, answerText, scenario, sel, sendShown, enterShown, streamText, threeShots, waitLoaded, waitStatus } from './harness.mjs';

const focused = (page) => page.evaluate(() => document.activeElement?.getAttribute('data-testid'));
const visible = (page, s) => page.isVisible(s);
const background = (page) => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
const LIGHT = 'rgb(247, 247, 245)';
const DARK = 'rgb(23, 24, 26)';

test('first screen: examples, no conversations yet, byte counter and a file, phone New chat, theme', { timeout: 240_000 }, async () => {
  await scenario('26-first-screen', {}, async ({ sys, newContext, shoot, snap }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await page.emulateMedia({ colorScheme: 'light' });
    await page.goto(sys.base + '/');
    await waitLoaded(page);

    // A fresh browser: examples, and an empty list that says so.
    await page.waitForSelector('[data-testid="examples"]:visible', { timeout: T.short });
    const prompts = await page.$$eval('[data-testid="example"]', (els) => els.map((e) => e.getAttribute('data-prompt')));
    for (const want of ['/stream 300 50', '/markdown', '/attachments']) assert.ok(prompts.includes(want), `an example of ${want}: ${prompts}`);
    assert.ok(prompts.some((p) => !p.startsWith('/')), 'and a plain question');
    await page.waitForSelector('[data-testid="no-conversations"]:visible', { timeout: T.short });
    assert.equal(await page.textContent('[data-testid="no-conversations"]'), 'No conversations yet');
    assert.equal(await visible(page, '[data-testid="header-new-conversation"]'), false, 'the header has no New chat beside the sidebar');
    assert.equal(await visible(page, '[data-testid="draft-size"]'), false, 'no counter for an empty box');
    await threeShots(page, '26-first-screen');

    // An example fills the box and gives it the focus; it does not send.
    await page.click('[data-testid="example"][data-prompt="/stream 300 50"]');
    assert.equal(await page.inputValue(sel.input), '/stream 300 50');
    assert.equal(await focused(page), 'composer-input', 'the box has the focus');
    assert.equal(await page.locator(sel.user).count(), 0, 'nothing sent yet');
    const stream = await enterShown(page);
    await page.waitForSelector('[data-testid="examples"]', { state: 'hidden', timeout: T.short });
    await page.waitForSelector('[data-testid="no-conversations"]', { state: 'hidden', timeout: T.short });
    await waitStatus(page, stream, 'done');
    assert.equal(await answerText(page, stream), streamText(300), 'the whole answer');

    // A CJK draft: 3 bytes a character. 9,000 characters (27,000 bytes) show the counter.
    const phrase = 'これは長い文章です。'; // 10 characters, 30 bytes
    const near = phrase.repeat(9000 / phrase.length);
    await page.fill(sel.input, near);
    await page.waitForSelector('[data-testid="draft-size"][data-level="near"]:visible', { timeout: T.short });
    assert.equal(await page.textContent('[data-testid="draft-size-text"]'), '27,000 / 32,768 bytes');
    assert.equal(await page.isDisabled('[data-testid="send-button"]'), false, 'near the limit it still sends');
    assert.equal(await visible(page, '[data-testid="send-as-file"]'), false, 'and needs no file');
    assert.equal(await page.textContent('[data-testid="draft-size-announcer"]'), 'Near the message limit: 27,000 / 32,768 bytes.');
    // Past the limit at 11,000 characters: an error, Send disabled with a reason, and the way out.
    const draft = phrase.repeat(11000 / phrase.length);
    const bytes = Buffer.byteLength(draft, 'utf8');
    assert.equal(bytes, 33000);
    await page.fill(sel.input, draft);
    await page.waitForSelector('[data-testid="draft-size"][data-level="over"]:visible', { timeout: T.short });
    assert.equal(await page.textContent('[data-testid="draft-size-text"]'), '33,000 / 32,768 bytes');
    assert.equal(await page.textContent('[data-testid="draft-size-reason"]'), 'Too long to send as a message.');
    assert.equal(await page.isDisabled('[data-testid="send-button"]'), true, 'Send is disabled');
    assert.equal(await page.getAttribute('[data-testid="send-button"]', 'aria-describedby'), 'draft-size', 'and says why');
    assert.match(await page.textContent('[data-testid="draft-size-announcer"]'), /^Too long to send as a message: 232 bytes over the limit/);
    await page.waitForSelector('[data-testid="send-as-file"]:visible', { timeout: T.short });
    await threeShots(page, '26-first-screen-too-long');

    // One click: the draft becomes message.txt, uploaded; the box is empty, and the file alone can go.
    await page.click('[data-testid="send-as-file"]');
    await page.waitForSelector('[data-testid="draft"][data-state="done"]', { timeout: T.long });
    assert.equal(await page.textContent('[data-testid="draft-name"]'), 'message.txt');
    assert.equal(await page.inputValue(sel.input), '');
    assert.equal(await visible(page, '[data-testid="draft-size"]'), false, 'the counter is gone');
    assert.equal(await page.textContent('[data-testid="draft-size-announcer"]'), 'The message fits again.');
    assert.equal(await page.isDisabled('[data-testid="send-button"]'), false, 'it can be sent');
    // Its bytes are the draft's: the demo engine names the file's size and SHA-256.
    const sha = createHash('sha256').update(draft, 'utf8').digest('hex');
    const files = await sendShown(page, '/attachments');
    await waitStatus(page, files, 'done');
    assert.equal(await answerText(page, files), `message.txt ${bytes} ${sha}`, "the engine's /attachments answer");
    assert.deepEqual(await sys.rows(`SELECT name, type, size, encode(sha256, 'hex') FROM uploads`), [['message.txt', 'text/plain; charset=utf-8', String(bytes), sha]]);

    // Phone width: the sidebar is a drawer, and the header has New chat.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForSelector('[data-testid="header-new-conversation"]:visible', { timeout: T.short });
    const before = await page.evaluate(() => window.tether.conversationId);
    await page.click('[data-testid="header-new-conversation"]');
    await page.waitForFunction((id) => window.tether.conversationId !== id && location.pathname === '/', before, { timeout: T.short });
    await page.waitForSelector('[data-testid="examples"]:visible', { timeout: T.short });
    assert.equal(await page.locator(sel.message).count(), 0, 'a new, empty conversation');
    assert.equal(await page.textContent('[data-testid="chat-title"]'), 'New conversation');
    await snap(page, 'phone-new');
    await page.setViewportSize({ width: 1280, height: 800 });

    // The theme: System → Light (over a dark system) → Dark, kept over a reload.
    assert.equal(await page.getAttribute('[data-testid="theme-button"]', 'aria-label'), 'Theme: system. Switch to light');
    await page.emulateMedia({ colorScheme: 'dark' });
    assert.equal(await background(page), DARK, 'the system is dark');
    await page.click('[data-testid="theme-button"]');
    assert.equal(await page.getAttribute('html', 'data-theme'), 'light');
    assert.equal(await background(page), LIGHT, 'light whatever the system says');
    assert.equal(await page.textContent('[data-testid="theme-announcer"]'), 'Theme: light');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.click('[data-testid="theme-button"]');
    assert.equal(await page.getAttribute('html', 'data-theme'), 'dark');
    assert.equal(await background(page), DARK, 'dark on a light system');
    assert.equal(await page.textContent('[data-testid="theme-announcer"]'), 'Theme: dark');
    assert.equal(await page.getAttribute('[data-testid="theme-button"]', 'aria-label'), 'Theme: dark. Switch to the system theme');
    await snap(page, 'chosen-dark');

    // After a reload it is dark before the UI draws anything.
    await page.evaluate(() => {
      window.name = '';
    });
    await page.addInitScript(() => {
      new MutationObserver((_, obs) => {
        const app = document.getElementById('app');
        if (app?.firstChild) {
          window.name = `theme-when-drawn:${document.documentElement.dataset.theme ?? 'none'}`;
          obs.disconnect();
        }
      }).observe(document, { childList: true, subtree: true });
    });
    await page.reload();
    await waitLoaded(page);
    assert.equal(await page.evaluate(() => window.name), 'theme-when-drawn:dark', 'the theme was on before the first drawing');
    assert.equal(await background(page), DARK, 'dark after a reload');
    // Another tab opens dark, and follows when this one goes back to the system's: nothing kept.
    const other = await context.newPage();
    await other.goto(sys.base + '/');
    await waitLoaded(other);
    assert.equal(await other.getAttribute('html', 'data-theme'), 'dark', 'another tab opens in the chosen theme');
    await page.click('[data-testid="theme-button"]');
    await other.waitForFunction(() => document.documentElement.dataset.theme === undefined, null, { timeout: T.short });
    assert.equal(await other.getAttribute('[data-testid="theme-button"]', 'aria-label'), 'Theme: system. Switch to light', 'and its button says so');
    await other.close();
    assert.equal(await page.getAttribute('html', 'data-theme'), null);
    assert.equal(await page.evaluate(() => window.localStorage.getItem('tether.v1.theme')), null);
    assert.equal(await background(page), LIGHT, 'the system is light');
    await page.reload();
    await waitLoaded(page);
    assert.equal(await page.getAttribute('html', 'data-theme'), null, 'still the system theme after a reload');
  });
});
