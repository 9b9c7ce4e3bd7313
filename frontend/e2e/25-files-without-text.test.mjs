// Scenario 25: files without text, and versions of a turn with files (issue
// 24, item 5). A file is sent with an empty message box: the user turn is
// its chip alone (no empty bubble) and the demo engine answers with what it
// received (as /attachments does). Regenerating that answer makes a second
// version that sends the same upload again and names the file again; editing
// the message keeps its file (the editor shows it as a chip) and sends the
// new text with it, and the edited turn's answer lists the file. The
// conversation is called after the file. Another edit removes the file's
// chip in the editor and sends the text alone. F5 keeps it all, and the
// database holds one upload held by three messages.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { T, answerText, openApp, scenario, sel, threeShots, waitLoaded, waitStatus } from './harness.mjs';

const NAME = 'quarterly notes.txt';
const DATA = Buffer.from('Revenue went up.\nCosts went down.\nNothing else of note.\n');
const WANT = `${NAME} ${DATA.length} ${createHash('sha256').update(DATA).digest('hex')}`;

const switcher = (id) => `${sel.assistant}[data-task-id="${id}"] [data-testid="version-switcher"]`;
const userRow = (id) => `${sel.user}[data-task-id="${id}"]`;
const lastSubmit = (page) => page.evaluate(() => window.__sent.filter((m) => m.type === 'submit').at(-1) ?? null);
const submits = (page) => page.evaluate(() => window.__sent.filter((m) => m.type === 'submit').length);

test('a file is sent without text, and its turn is regenerated and edited with the file', { timeout: 180_000 }, async (t) => {
  await scenario('25-files-without-text', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);

    // An empty box with no file sends nothing, by the button or by Enter.
    assert.equal(await page.isDisabled('[data-testid="send-button"]'), true, 'nothing to send yet');
    await page.press(sel.input, 'Enter');
    assert.equal(await submits(page), 0, 'Enter in an empty box sends nothing');

    await page.setInputFiles('[data-testid="file-input"]', { name: NAME, mimeType: 'text/plain', buffer: DATA });
    await page.waitForSelector('[data-testid="draft"][data-state="done"]', { timeout: T.long });
    await page.waitForSelector('[data-testid="send-button"]:not([disabled])', { timeout: T.short });
    assert.equal(await page.inputValue(sel.input), '', 'the box is still empty');
    await page.press(sel.input, 'Enter');
    await page.waitForFunction(() => window.__sent.some((m) => m.type === 'submit'), null, { timeout: T.short });
    const sent = await lastSubmit(page);
    assert.equal(sent.content, '', 'files alone: the empty text');
    assert.equal(sent.attachments?.length, 1, 'with the file');
    const upload = sent.attachments[0];
    const first = sent.task_id;
    await waitStatus(page, first, 'done');
    assert.equal(await answerText(page, first), WANT, 'the engine names the file it received');
    await page.waitForSelector('[data-testid="draft-list"][hidden]', { state: 'attached', timeout: T.short });

    // The user turn is its chip alone: no empty bubble.
    const row = userRow(first);
    await page.waitForSelector(`${row}.files-only [data-testid="attachment-chip"][data-id="${upload}"]`, { timeout: T.short });
    assert.equal(await page.isVisible(`${row} [data-testid="message-content"]`), false, 'no empty bubble');
    assert.equal(await page.textContent(`${row} [data-testid="attachment-chip"] .chip-name`), NAME);
    // The conversation is called after its file, here and in the list the server sends.
    await page.waitForFunction((name) => document.querySelector('[data-testid="chat-title"]')?.textContent === name, NAME, { timeout: T.short });
    await threeShots(page, '25-files-without-text');

    // Regenerate: a second version with the same (empty) text and the same upload.
    await page.click(`${sel.assistant}[data-task-id="${first}"] [data-testid="regenerate-button"]`);
    await page.waitForFunction((id) => window.__sent.filter((m) => m.type === 'submit').at(-1)?.task_id !== id, first, { timeout: T.short });
    const regen = await lastSubmit(page);
    assert.equal(regen.version_of, first, 'the regenerate names the turn it redoes');
    assert.equal(regen.content, '', 'with the same text');
    assert.deepEqual(regen.attachments, [upload], 'and the same upload');
    const second = regen.task_id;
    await waitStatus(page, second, 'done');
    assert.equal(await answerText(page, second), WANT, 'the second version names the file again');
    await page.waitForSelector(`${switcher(second)}[data-index="2"][data-count="2"]`, { timeout: T.short });
    await page.waitForSelector(`${userRow(second)}.files-only [data-testid="attachment-chip"][data-id="${upload}"]`, { timeout: T.short });
    await threeShots(page, '25-files-without-text-regenerated');

    // Edit the message: the editor keeps the file; add text that asks for the files.
    await page.click(`${userRow(second)} [data-testid="edit-button"]`);
    await page.waitForSelector(`${userRow(second)} [data-testid="edit-attachment"][data-id="${upload}"]`, { timeout: T.short });
    assert.equal(await page.isVisible(`${userRow(second)} [data-testid="message-attachments"]`), false, 'the chips show once, in the editor');
    await page.fill(`${userRow(second)} [data-testid="edit-input"]`, '/attachments');
    await threeShots(page, '25-files-without-text-editing');
    await page.click(`${userRow(second)} [data-testid="edit-send"]`);
    await page.waitForFunction((id) => window.__sent.filter((m) => m.type === 'submit').at(-1)?.task_id !== id, second, { timeout: T.short });
    const edit = await lastSubmit(page);
    assert.equal(edit.version_of, second);
    assert.equal(edit.content, '/attachments', 'the edited text');
    assert.deepEqual(edit.attachments, [upload], 'with the file kept');
    const third = edit.task_id;
    await waitStatus(page, third, 'done');
    assert.equal(await answerText(page, third), WANT, 'the edited turn’s answer lists the file');
    await page.waitForSelector(`${switcher(third)}[data-index="3"][data-count="3"]`, { timeout: T.short });
    assert.equal(await page.textContent(`${userRow(third)} [data-testid="message-content"]`), '/attachments');
    assert.equal(await page.isVisible(`${userRow(third)} [data-testid="attachment-chip"][data-id="${upload}"]`), true, 'the edited message shows its file');
    await threeShots(page, '25-files-without-text-edited');

    // An edit may leave the file out: remove its chip in the editor.
    await page.click(`${userRow(third)} [data-testid="edit-button"]`);
    await page.click(`${userRow(third)} [data-testid="edit-attachment-remove"]`);
    await page.waitForSelector(`${userRow(third)} [data-testid="edit-attachments"][hidden]`, { state: 'attached', timeout: T.short });
    await page.click(`${userRow(third)} [data-testid="edit-send"]`);
    await page.waitForFunction((id) => window.__sent.filter((m) => m.type === 'submit').at(-1)?.task_id !== id, third, { timeout: T.short });
    const without = await lastSubmit(page);
    assert.equal(without.content, '/attachments');
    assert.equal(without.attachments, undefined, 'no files this time');
    const fourth = without.task_id;
    await waitStatus(page, fourth, 'done');
    assert.equal(await answerText(page, fourth), 'no attachments');
    await page.waitForSelector(`${switcher(fourth)}[data-index="4"][data-count="4"]`, { timeout: T.short });
    assert.equal(await page.isVisible(`${userRow(fourth)} [data-testid="message-attachments"]`), false, 'and no chip');

    // F5: history has the same four versions, the first three with the file.
    await page.reload();
    await waitLoaded(page);
    await page.waitForSelector(`${switcher(fourth)}[data-count="4"]`, { timeout: T.short });
    await page.click(`${switcher(fourth)} [data-testid="version-prev"]`);
    await page.waitForSelector(`${userRow(third)} [data-testid="attachment-chip"][data-id="${upload}"]`, { timeout: T.short });
    await page.click(`${switcher(third)} [data-testid="version-prev"]`);
    await page.waitForSelector(`${switcher(second)}[data-index="2"]`, { timeout: T.short });
    await page.click(`${switcher(second)} [data-testid="version-prev"]`);
    await page.waitForSelector(`${userRow(first)}.files-only [data-testid="attachment-chip"][data-id="${upload}"]`, { timeout: T.short });

    const conv = await page.evaluate(() => window.tether.conversationId);
    assert.equal(await sys.sql(`SELECT title FROM conversations WHERE id = '${conv}'`), NAME, 'the stored title is the file’s name');
    const rows = await sys.rows(`SELECT m.task_id, m.content, a.upload_id FROM messages m JOIN message_attachments a ON a.message_id = m.id WHERE m.conversation_id = '${conv}' ORDER BY m.created_at, m.id`);
    t.diagnostic(`held: ${JSON.stringify(rows)}`);
    assert.deepEqual(rows, [[first, '', upload], [second, '', upload], [third, '/attachments', upload]], 'one upload, held by each version');
    assert.equal(await sys.sql(`SELECT count(*) FROM uploads`), '1');
    assert.equal(await sys.sql(`SELECT count(*) FROM uploads WHERE expires_at IS NULL`), '1', 'held: it does not expire');
  });
});
