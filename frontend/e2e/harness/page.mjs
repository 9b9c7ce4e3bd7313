// What a scenario does with a page of the chat UI, and what it reads off it.
import path from 'node:path';
import { artifacts } from './paths.mjs';
import { T } from './wait.mjs';

export const sel = {
  live: '[data-testid="connection"][data-state="live"]',
  input: '[data-testid="composer-input"]',
  assistant: '[data-testid="message"][data-role="assistant"]',
  user: '[data-testid="message"][data-role="user"]',
  message: '[data-testid="message"]',
};

/** Opens the UI and waits until it is connected and has loaded its conversation. */
export async function openApp(page, base) {
  await page.goto(base + '/');
  await waitLoaded(page);
}

export async function waitLoaded(page) {
  await page.waitForSelector(sel.live, { timeout: T.long });
  await page.waitForSelector('[data-testid="message-list"][aria-busy="false"]', { timeout: T.long });
}

/** Types a message and presses Enter; returns the task id the client made for it. */
export async function send(page, text) {
  const before = await page.evaluate(() => window.localStorage.getItem('tether.v1.active'));
  await page.fill(sel.input, text);
  await page.press(sel.input, 'Enter');
  const active = await page.waitForFunction(
    (prev) => {
      const v = window.localStorage.getItem('tether.v1.active');
      return v && v !== prev ? JSON.parse(v) : null;
    },
    before,
    { timeout: T.short },
  );
  return (await active.jsonValue()).task_id;
}

/**
 * Types a message, presses Enter and returns the task id of the user
 * message it shows. Unlike send, it does not watch the active pointer,
 * which an answer that finishes at once (the demo's /attachments) may set
 * and clear between two polls.
 */
export async function sendShown(page, text) {
  await page.fill(sel.input, text);
  return enterShown(page);
}

/** Presses Enter in the message box, as it is, and returns the task id of the user message it shows. */
export async function enterShown(page) {
  const before = await page.locator(sel.user).count();
  await page.press(sel.input, 'Enter');
  const id = await page.waitForFunction(
    (n) => {
      const els = document.querySelectorAll('[data-testid="message"][data-role="user"]');
      return els.length > n ? els[els.length - 1].getAttribute('data-task-id') : null;
    },
    before,
    { timeout: T.short },
  );
  return id.jsonValue();
}

export function assistantOf(page, taskId) {
  return page.locator(`${sel.assistant}[data-task-id="${taskId}"]`);
}

/**
 * The assistant message's text, exactly: the Markdown source of what the
 * answer shows (its data-source-length characters of the text the client
 * holds). It first gives the render a moment to catch up with the text.
 */
export async function answerText(page, taskId) {
  const read = (id) => {
    const el = document.querySelector(`[data-testid="message"][data-role="assistant"][data-task-id="${id}"] [data-testid="message-content"]`);
    if (!el) return { text: null, caughtUp: true };
    const m = window.tether.view().messages.find((x) => x.role === 'assistant' && x.task_id === id);
    const len = Number(el.dataset.sourceLength ?? -1);
    if (!m || len < 0) return { text: el.textContent, caughtUp: true };
    return { text: m.content.slice(0, len), caughtUp: len === m.content.length };
  };
  await page.waitForFunction(`(${read.toString()})(${JSON.stringify(taskId)}).caughtUp`, null, { timeout: 2000 }).catch(() => undefined);
  return (await page.evaluate(read, taskId)).text;
}

/** The answer's text as the page shows it (rendered Markdown: textContent). */
export async function renderedText(page, taskId) {
  return page.evaluate((id) => document.querySelector(`[data-testid="message"][data-role="assistant"][data-task-id="${id}"] [data-testid="message-content"]`)?.textContent ?? null, taskId);
}

export async function waitStatus(page, taskId, status, timeout = T.long) {
  await page.waitForSelector(`${sel.assistant}[data-task-id="${taskId}"][data-status="${status}"]`, { timeout });
}

/** Waits until the answer shows at least n characters of text (it is streaming). */
export async function waitTextAtLeast(page, taskId, n, timeout = T.long) {
  await page.waitForFunction(
    ({ id, n }) => (document.querySelector(`[data-testid="message"][data-role="assistant"][data-task-id="${id}"] [data-testid="message-content"]`)?.textContent?.length ?? 0) >= n,
    { id: taskId, n },
    { timeout },
  );
}

export async function progressOf(page, taskId) {
  const v = await page.getAttribute(`${sel.assistant}[data-task-id="${taskId}"] [data-testid="progress"]`, 'data-value', { timeout: T.short });
  return v === null ? null : Number(v);
}

/**
 * Screenshots of a page's present state on a desktop (as it is), in dark
 * mode and at phone width (390x844, the drawer closed), restored afterwards:
 * test-artifacts/e2e/<name>-desktop.png, -dark.png, -phone.png. prepare(page),
 * if given, runs before each shot (to scroll something into view).
 */
export async function threeShots(page, name, prepare = async () => undefined) {
  const size = page.viewportSize();
  const shot = async (suffix) => {
    await prepare(page);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    await page.screenshot({ path: path.join(artifacts, `${name}-${suffix}.png`) });
  };
  await shot('desktop');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot('dark');
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForFunction(() => (document.querySelector('.sidebar')?.getBoundingClientRect().right ?? 0) <= 0, null, { timeout: T.short }).catch(() => undefined);
  await shot('phone');
  await page.setViewportSize(size);
}
