// The browser rendering benchmark: how much of Chromium's main thread the chat
// UI takes for (a) the demo's `/stream 20000 0` (20,000 tokens sent as fast as
// the runner can) streamed into the page, and (b) opening a conversation of
// 300 messages and scrolling it back to its start. It starts the real system
// the way the end-to-end tests do (a fresh database on TEST_DATABASE_URL's
// server, bin/gateway, bin/runner; TETHER_BIN_DIR picks other binaries, e.g.
// an older build to compare with) and drives Debian's Chromium.
//
//   make bench-ui                                       # builds, throwaway Postgres
//   ./scripts/with-test-pg.sh node frontend/bench/render.mjs   # after make build
//
// The figure is main-thread time from CDP Performance.getMetrics in the
// threadTicks domain (CPU time of the renderer's main thread, so other
// processes on a busy machine do not inflate it): TaskDuration (all tasks),
// Layout + RecalcStyle, and ScriptDuration in the JSON only: Chromium does not
// count script run from a WebSocket message event there, so it moves when work
// moves from message events to animation frames and compares nothing.
// "render" is the time the page spends in the client's view handlers (the UI
// drawing each view, measured in the page with performance.now()); "views"
// counts the client's view events; "mutations" the DOM mutation records under
// the message list. Each scenario runs TETHER_BENCH_RUNS times (default 3) in a fresh page;
// the median is printed and every run is written to
// test-artifacts/bench-ui/render.json. It measures; it asserts nothing.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { launchBrowser, root, startSystem, streamText, waitUntil } from '../e2e/harness.mjs';

const runs = Number(process.env.TETHER_BENCH_RUNS || 3);
const TOKENS = 20_000;
const TURNS = 150; // 300 messages
const out = path.join(root, 'test-artifacts', 'bench-ui');
const long = 300_000;

/** Counts, in the page, the client's views and the DOM mutations of the message list. */
const counters = () => {
  window.__bench = { views: 0, mutations: 0, renderMs: 0 };
  const hook = () => {
    if (!window.tether || !document.querySelector('[data-testid="message-list"]')) return requestAnimationFrame(hook);
    window.tether.events.on('view', () => window.__bench.views++);
    const events = window.tether.events;
    const emit = events.emit.bind(events);
    events.emit = (name, payload) => {
      const t = performance.now();
      emit(name, payload);
      if (name === 'view') window.__bench.renderMs += performance.now() - t;
    };
    new MutationObserver((m) => (window.__bench.mutations += m.length)).observe(document.querySelector('[data-testid="message-list"]'), {
      subtree: true,
      childList: true,
      attributes: true,
      characterData: true,
    });
  };
  hook();
};

async function metrics(cdp) {
  const { metrics } = await cdp.send('Performance.getMetrics');
  const m = Object.fromEntries(metrics.map((x) => [x.name, x.value]));
  return { task: m.TaskDuration * 1000, script: m.ScriptDuration * 1000, layout: (m.LayoutDuration + m.RecalcStyleDuration) * 1000 };
}

/** Measures what happens in the page between start and end, from a quiet page. */
async function measure(page, cdp, act) {
  await settle(page);
  await page.evaluate(() => Object.assign(window.__bench, { views: 0, mutations: 0, renderMs: 0 }));
  const before = await metrics(cdp);
  const t0 = Date.now();
  await act();
  await settle(page);
  const wall = Date.now() - t0;
  const after = await metrics(cdp);
  const c = await page.evaluate(() => window.__bench);
  return {
    taskMs: round(after.task - before.task),
    scriptMs: round(after.script - before.script),
    layoutMs: round(after.layout - before.layout),
    renderMs: round(c.renderMs),
    views: c.views,
    mutations: c.mutations,
    wallMs: wall,
  };
}

/** Two animation frames and a quiet moment: what was scheduled has run. */
async function settle(page) {
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 200)))));
}

/** One browser context (one session cookie, one localStorage) for every page of the benchmark. */
async function newContext(browser) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  await context.addInitScript(counters);
  return context;
}

/** A fresh page on an empty conversation, connected, with CDP metrics on. */
async function newPage(context, base) {
  const page = await context.newPage();
  await page.goto(base + '/');
  await page.waitForSelector('[data-testid="connection"][data-state="live"]', { timeout: long });
  await page.waitForSelector('[data-testid="message-list"][aria-busy="false"]', { timeout: long });
  await page.waitForFunction(() => window.__bench && window.tether);
  const cdp = await context.newCDPSession(page);
  await cdp.send('Performance.enable', { timeDomain: 'threadTicks' });
  if ((await page.locator('[data-testid="message"]').count()) > 0) {
    await page.click('[data-testid="new-conversation"]');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="message"]').length === 0);
  }
  return { page, cdp };
}

/** (a) /stream 20000 0 typed into a new conversation, until the whole answer shows. */
async function streamRun(context, base) {
  const { page, cdp } = await newPage(context, base);
  const want = streamText(TOKENS).length;
  const r = await measure(page, cdp, async () => {
    await page.fill('[data-testid="composer-input"]', `/stream ${TOKENS} 0`);
    await page.press('[data-testid="composer-input"]', 'Enter');
    await page.waitForFunction(
      (want) => {
        const a = document.querySelector('[data-testid="message"][data-role="assistant"][data-status="done"] [data-testid="message-content"]');
        return a && Number(a.dataset.sourceLength) === want;
      },
      want,
      { timeout: long, polling: 250 },
    );
  });
  const shown = await page.evaluate(() => window.tether.view().messages.find((m) => m.role === 'assistant')?.content);
  if (shown !== streamText(TOKENS)) throw new Error(`the answer is not exact (${shown?.length} of ${want} characters)`);
  await page.close();
  return r;
}

/** Makes a conversation of TURNS questions and answers over HTTP (every fifth answer the /markdown demo). */
async function makeConversation(context, sys) {
  const { page } = await newPage(context, sys.base);
  const conv = await page.evaluate(() => window.tether.conversationId);
  for (let i = 1; i <= TURNS; i++) {
    const content = i % 5 === 0 ? '/markdown' : `/stream ${40 + (i % 7) * 10} 0`;
    const r = await page.request.post(`${sys.base}/v1/tasks`, { data: { task_id: randomUUID(), conversation_id: conv, content }, headers: { Origin: sys.base } });
    if (r.status() !== 201) throw new Error(`submit ${i}: ${r.status()} ${await r.text()}`);
  }
  await waitUntil(async () => (await sys.sql(`SELECT count(*) FROM tasks WHERE conversation_id = '${conv}' AND status = 'done'`)) === String(TURNS), {
    timeout: long,
    what: `${TURNS} answers done`,
  });
  await page.close();
  return conv;
}

/** (b) Opens the long conversation from the sidebar and scrolls up until its first message shows. */
async function openRun(context, base, conv) {
  const { page, cdp } = await newPage(context, base);
  await page.waitForSelector(`[data-testid="conversation-item"][data-id="${conv}"]`, { timeout: long });
  const opened = await measure(page, cdp, async () => {
    await page.click(`[data-testid="conversation-item"][data-id="${conv}"]`);
    await page.waitForFunction(
      (conv) => window.tether.conversationId === conv && document.querySelector('[data-testid="message-list"]').getAttribute('aria-busy') === 'false' && document.querySelectorAll('[data-testid="message"]').length > 0,
      conv,
      { timeout: long, polling: 100 },
    );
  });
  const paged = await measure(page, cdp, async () => {
    for (let round = 0; round < 20; round++) {
      if ((await page.getAttribute('[data-testid="history-top"]', 'data-state')) === 'start') break;
      const count = await page.locator('[data-testid="message"]').count();
      await page.locator('[data-testid="message-list"]').evaluate((el) => el.scrollTo(0, 0));
      await page.waitForFunction(
        (count) => document.querySelectorAll('[data-testid="message"]').length > count && document.querySelector('[data-testid="history-top"]').getAttribute('data-state') !== 'loading',
        count,
        { timeout: long, polling: 100 },
      );
    }
  });
  const whole = Object.fromEntries(Object.keys(opened).map((k) => [k, round(opened[k] + paged[k])]));
  const n = await page.locator('[data-testid="message"]').count();
  if (n !== 2 * TURNS) throw new Error(`the conversation shows ${n} messages, not ${2 * TURNS}`);
  await page.close();
  return { opened, whole };
}

function round(x) {
  return Math.round(x * 10) / 10;
}

function median(rows, key) {
  const v = rows.map((r) => r[key]).sort((a, b) => a - b);
  return v[Math.floor(v.length / 2)];
}

function summary(rows) {
  return Object.fromEntries(['taskMs', 'scriptMs', 'layoutMs', 'renderMs', 'views', 'mutations', 'wallMs'].map((k) => [k, median(rows, k)]));
}

async function main() {
  fs.mkdirSync(out, { recursive: true });
  const sys = await startSystem('bench-ui');
  let browser;
  const result = { when: new Date().toISOString(), bin: process.env.TETHER_BIN_DIR || 'bin', runs, stream: [], open: [], openAll: [] };
  try {
    browser = await launchBrowser();
    const context = await newContext(browser);
    for (let i = 0; i < runs; i++) {
      result.stream.push(await streamRun(context, sys.base));
      console.error(`stream run ${i + 1}: ${JSON.stringify(result.stream[i])}`);
    }
    const conv = await makeConversation(context, sys);
    for (let i = 0; i < runs; i++) {
      const r = await openRun(context, sys.base, conv);
      result.open.push(r.opened);
      result.openAll.push(r.whole);
      console.error(`open run ${i + 1}: ${JSON.stringify(r)}`);
    }
  } finally {
    await browser?.close().catch(() => undefined);
    await sys.stop();
  }
  const rows = [
    [`(a) /stream ${TOKENS} 0`, summary(result.stream)],
    [`(b) open ${2 * TURNS} messages: newest page`, summary(result.open)],
    [`(b) open ${2 * TURNS} messages: to the start`, summary(result.openAll)],
  ];
  result.median = Object.fromEntries(rows);
  fs.writeFileSync(path.join(out, 'render.json'), JSON.stringify(result, null, 2) + '\n');
  console.log(`median of ${runs} runs; main-thread ms (CPU, threadTicks)\n`);
  console.log('| scenario | main thread | layout + style | render | views | DOM mutations | wall |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const [name, s] of rows) console.log(`| ${name} | ${s.taskMs} | ${s.layoutMs} | ${s.renderMs} | ${s.views} | ${s.mutations} | ${s.wallMs} |`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
