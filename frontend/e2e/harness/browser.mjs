// Headless Chromium (Debian's, driven by playwright-core), with probes that
// record what every page sends and shows from its first moment.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumPath, logDir } from './paths.mjs';

export async function launchBrowser() {
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
  });
}

/**
 * Records, in every page of the context and from the first moment of each
 * page load: what the page sends over its WebSocket, or to the tab whose
 * socket it shares (window.__sent), every
 * value a progress bar shows (window.__progress), every length an answer's
 * text takes (window.__texts) and every state the connection indicator
 * shows (window.__conn). Assertions about "never" need the whole history,
 * not the last value.
 */
const probes = () => {
  window.__sent = [];
  window.__carried = 0; // what a leader tab sent for the tabs that share its socket
  let forwarding = false;
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (forwarding) {
      window.__carried++;
      return send.call(this, data);
    }
    try {
      window.__sent.push(JSON.parse(data));
    } catch {
      /* not JSON: not ours */
    }
    return send.call(this, data);
  };
  // A tab that shares another tab's socket (one socket per browser) sends
  // its messages to that tab instead: they count as what this page sent.
  // The leader tab's socket carries them too, and they are not its own.
  const post = BroadcastChannel.prototype.postMessage;
  BroadcastChannel.prototype.postMessage = function (data) {
    if (this.name === 'tether.v1.link' && data && data.t === 'req' && data.msg) window.__sent.push(data.msg);
    return post.call(this, data);
  };
  const listen = BroadcastChannel.prototype.addEventListener;
  const unlisten = BroadcastChannel.prototype.removeEventListener;
  const wrappers = new WeakMap();
  BroadcastChannel.prototype.removeEventListener = function (type, fn, opts) {
    return unlisten.call(this, type, wrappers.get(fn) ?? fn, opts);
  };
  BroadcastChannel.prototype.addEventListener = function (type, fn, opts) {
    if (this.name !== 'tether.v1.link' || type !== 'message' || typeof fn !== 'function') return listen.call(this, type, fn, opts);
    const wrapped = function (ev) {
      forwarding = !!(ev.data && ev.data.t === 'req');
      try {
        return fn.call(this, ev);
      } finally {
        forwarding = false;
      }
    };
    wrappers.set(fn, wrapped);
    return listen.call(this, type, wrapped, opts);
  };
  window.__progress = [];
  window.__texts = [];
  window.__conn = [];
  const taskOf = (el) => el.closest('[data-task-id]')?.getAttribute('data-task-id') ?? null;
  const record = (el) => {
    switch (el.getAttribute('data-testid')) {
      case 'progress':
        if (el.hasAttribute('data-value') && !el.hidden) window.__progress.push({ task: taskOf(el), value: Number(el.getAttribute('data-value')) });
        return;
      case 'message-content':
        // An answer is rendered Markdown: its data-source-length says how much of its text it shows.
        if (el.closest('[data-role="assistant"]')) window.__texts.push({ task: taskOf(el), len: Number(el.dataset.sourceLength ?? el.textContent.length), at: performance.now() });
        return;
      case 'connection':
        if (window.__conn[window.__conn.length - 1] !== el.getAttribute('data-state')) window.__conn.push(el.getAttribute('data-state'));
        return;
    }
  };
  const interesting = '[data-testid="progress"], [data-testid="message-content"], [data-testid="connection"]';
  new MutationObserver((muts) => {
    for (const m of muts) {
      if (m.target.nodeType === 1) record(m.target);
      for (const n of m.addedNodes) {
        if (n.nodeType !== 1) continue;
        record(n);
        for (const el of n.querySelectorAll(interesting)) record(el);
      }
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-value', 'data-state', 'hidden', 'data-source-length'] });
};

export async function newContext(browser, name) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  await context.addInitScript(probes);
  const log = fs.createWriteStream(path.join(logDir, `${name}-browser.log`), { flags: 'a' });
  context.on('page', (p) => watchPage(p, log));
  context.on('close', () => log.end());
  return context;
}

let pageSeq = 0;
function watchPage(page, log) {
  const id = ++pageSeq;
  page.on('console', (m) => log.write(`[page ${id}] console.${m.type()}: ${m.text()}\n`));
  page.on('pageerror', (e) => log.write(`[page ${id}] pageerror: ${e.stack || e.message}\n`));
  page.on('websocket', (ws) => {
    log.write(`[page ${id}] ws open ${ws.url()}\n`);
    ws.on('close', () => log.write(`[page ${id}] ws closed\n`));
  });
}
