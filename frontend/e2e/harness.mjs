// The end-to-end harness: the real system (a fresh Postgres database, the
// gateway binary with embedded NATS, one runner) and headless Chromium driven
// by playwright-core, one of each per scenario so scenarios cannot disturb
// each other. Every process is started here, tracked by PID and stopped here
// (SIGTERM, then SIGKILL); their output goes to test-artifacts/e2e/logs/.
//
// Needs TEST_DATABASE_URL (scripts/with-test-pg.sh sets it), bin/gateway and
// bin/runner (make build) and /usr/bin/chromium (scripts/ensure-chromium.sh).
import { spawn, execFile } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const execFileP = promisify(execFile);

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const artifacts = path.join(root, 'test-artifacts', 'e2e');
const logDir = path.join(artifacts, 'logs');
const bin = (name) => path.join(process.env.TETHER_BIN_DIR || path.join(root, 'bin'), name);
const chromiumPath = process.env.TETHER_CHROMIUM || '/usr/bin/chromium';

/** Generous: the machine has two cores and runs Postgres, Go and Chromium at once. */
export const T = { short: 15_000, long: 60_000 };

/** The exact output of the demo engine's `/stream n ms`. */
export function streamText(n) {
  let s = '';
  for (let i = 1; i <= n; i++) s += `t${i} `;
  return s;
}

// ---- waiting ------------------------------------------------------------------

/**
 * Polls fn until it returns a truthy value (returned) or the deadline passes.
 * For conditions outside the browser (the database, a process); inside the
 * page, use playwright's waitForFunction / waitForSelector.
 */
export async function waitUntil(fn, { timeout = T.long, interval = 100, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout}ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, interval));
  }
}

// ---- ports, processes ---------------------------------------------------------

export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

/**
 * Every child still running. If the test process itself is told to stop
 * (Ctrl-C, a CI timeout), it kills them by PID first, so no gateway or
 * runner outlives a run.
 */
const live = new Set();
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    for (const p of live) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    process.exit(130);
  });
}

/** A child process whose stdout and stderr go to a log file, stopped by PID. */
class Proc {
  constructor(name, file, args, env) {
    this.name = name;
    this.logPath = path.join(logDir, `${name}.log`);
    fs.mkdirSync(logDir, { recursive: true });
    this.log = fs.createWriteStream(this.logPath, { flags: 'a' });
    this.log.write(`==== ${new Date().toISOString()} start ${file} ${args.join(' ')}\n`);
    this.out = '';
    this.child = spawn(file, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.pid = this.child.pid;
    live.add(this);
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        live.delete(this);
        this.exitCode = code;
        this.exitSignal = signal;
        this.log.write(`==== ${new Date().toISOString()} exit code=${code} signal=${signal}\n`);
        resolve({ code, signal });
      });
      this.child.on('error', (err) => {
        live.delete(this);
        this.log.write(`==== spawn error: ${err.message}\n`);
        this.exitCode = -1;
        resolve({ code: -1, signal: null });
      });
    });
    for (const s of [this.child.stdout, this.child.stderr]) {
      s.on('data', (b) => {
        this.log.write(b);
        if (this.out.length < 1 << 16) this.out += b.toString();
      });
    }
  }

  get running() {
    return this.exitCode === undefined;
  }

  /** SIGTERM, then SIGKILL if it has not exited within graceMs. */
  async stop(graceMs = 10_000) {
    if (!this.running) return this.exited;
    process.kill(this.pid, 'SIGTERM');
    const timer = setTimeout(() => {
      if (this.running) {
        this.log.write(`==== still running ${graceMs}ms after SIGTERM: SIGKILL\n`);
        try {
          process.kill(this.pid, 'SIGKILL');
        } catch {
          /* gone meanwhile */
        }
      }
    }, graceMs);
    const r = await this.exited;
    clearTimeout(timer);
    await new Promise((res) => this.log.end(res));
    return r;
  }

  tail(n = 2000) {
    try {
      const s = fs.readFileSync(this.logPath, 'utf8');
      return s.slice(-n);
    } catch {
      return '';
    }
  }
}

async function waitReady(proc, base) {
  await waitUntil(
    async () => {
      if (!proc.running) throw new Error(`${proc.name} exited (${proc.exitCode}); log:\n${proc.tail()}`);
      const r = await fetch(`${base}/readyz`).catch(() => null);
      return r?.status === 200;
    },
    { timeout: T.long, what: `${proc.name} /readyz`, interval: 50 },
  ).catch((err) => {
    throw new Error(`${err.message}\n--- ${proc.logPath}:\n${proc.tail()}`);
  });
}

// ---- Postgres -----------------------------------------------------------------

function dbURL(base, name) {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Runs SQL with psql and returns its unaligned, tuples-only output (fields split on '|'). */
export async function psql(url, query) {
  const { stdout } = await execFileP('psql', [url, '-X', '-q', '-t', '-A', '-v', 'ON_ERROR_STOP=1', '-c', query], { timeout: 30_000 });
  return stdout.trim();
}

export async function sqlRows(url, query) {
  const out = await psql(url, query);
  return out === '' ? [] : out.split('\n').map((l) => l.split('|'));
}

// ---- the system ---------------------------------------------------------------

/**
 * Starts a fresh database, a gateway and a runner. With separateNats, NATS
 * lives in a first gateway that serves nothing else to the test (as in a
 * multi-gateway deployment), so the web gateway can restart without taking
 * NATS (and the runner's connection) down with it. runners starts that many
 * runners (sys.runners; sys.runner is the first), each with its own
 * TETHER_RUNNER_ID (runner.id); env is added to every gateway's and runner's
 * environment (e.g. a short TETHER_LEASE).
 */
export async function startSystem(name, { separateNats = false, runners = 1, env = {} } = {}) {
  const base = process.env.TEST_DATABASE_URL;
  if (!base) throw new Error('TEST_DATABASE_URL is not set (run through scripts/with-test-pg.sh or make test-e2e)');
  const dbName = `tether_e2e_${name.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  await psql(base, `CREATE DATABASE ${dbName}`);
  const db = dbURL(base, dbName);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tether-e2e-'));
  const procs = [];
  const sys = {
    name,
    db,
    procs,
    base: '',
    port: 0,
    sql: (q) => psql(db, q),
    rows: (q) => sqlRows(db, q),
    gateway: null,
    /** Stops the web gateway (SIGTERM: tabs get 1012) and waits for it to exit. */
    async stopGateway() {
      await sys.gateway.stop();
    },
    /** Starts the web gateway again on the same port and waits for /readyz. */
    async startGateway() {
      sys.gateway = new Proc(`${name}-gateway`, bin('gateway'), [], gatewayEnv);
      procs.push(sys.gateway);
      await waitReady(sys.gateway, sys.base);
    },
    async stop() {
      // Runner first (it drains), then the gateways, NATS owner last.
      for (const p of [...procs].reverse()) await p.stop();
      fs.rmSync(tmp, { recursive: true, force: true });
      await psql(base, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    },
  };
  let gatewayEnv;
  try {
    const natsPort = await freePort();
    const natsURL = `nats://127.0.0.1:${natsPort}`;
    const common = {
      DATABASE_URL: db,
      TETHER_RATE: '0',
      TETHER_SESSION_KEY: 'e2e-session-key-that-is-long-enough-0123456789',
      TETHER_LOG_LEVEL: 'debug',
      ...env,
    };
    if (separateNats) {
      const natsHTTP = await freePort();
      const owner = new Proc(`${name}-nats-gateway`, bin('gateway'), [], {
        ...common,
        TETHER_ADDR: `127.0.0.1:${natsHTTP}`,
        TETHER_NATS_LISTEN: `127.0.0.1:${natsPort}`,
        TETHER_DATA_DIR: path.join(tmp, 'nats-owner'),
        NATS_URL: '',
      });
      procs.push(owner);
      await waitReady(owner, `http://127.0.0.1:${natsHTTP}`);
    }
    sys.port = await freePort();
    sys.base = `http://127.0.0.1:${sys.port}`;
    gatewayEnv = {
      ...common,
      TETHER_ADDR: `127.0.0.1:${sys.port}`,
      TETHER_DATA_DIR: path.join(tmp, 'gateway'),
      ...(separateNats ? { NATS_URL: natsURL } : { TETHER_NATS_LISTEN: `127.0.0.1:${natsPort}`, NATS_URL: '' }),
    };
    await sys.startGateway();
    sys.runners = [];
    for (let i = 1; i <= runners; i++) {
      const suffix = i === 1 ? '' : `-${i}`;
      const runner = new Proc(`${name}-runner${suffix}`, bin('runner'), [], {
        DATABASE_URL: db,
        NATS_URL: natsURL,
        TETHER_DRAIN_TIMEOUT: '2s',
        TETHER_LOG_LEVEL: 'debug',
        TETHER_RUNNER_ID: `e2e-${name}${suffix}`,
        ...env,
      });
      runner.id = `e2e-${name}${suffix}`;
      procs.push(runner);
      sys.runners.push(runner);
    }
    // A runner prints its banner once Postgres and NATS are reached.
    for (const runner of sys.runners) {
      await waitUntil(
        () => {
          if (!runner.running) throw new Error(`${runner.name} exited (${runner.exitCode}):\n${runner.tail()}`);
          return runner.out.includes('engine demo');
        },
        { timeout: T.long, what: `the banner of ${runner.name}`, interval: 50 },
      );
    }
    sys.runner = sys.runners[0];
    return sys;
  } catch (err) {
    await sys.stop().catch(() => undefined);
    throw err;
  }
}

// ---- the browser --------------------------------------------------------------

export async function launchBrowser() {
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
  });
}

/**
 * Records, in every page of the context and from the first moment of each
 * page load: what the page sends over its WebSocket (window.__sent), every
 * value a progress bar shows (window.__progress), every length an answer's
 * text takes (window.__texts) and every state the connection indicator
 * shows (window.__conn). Assertions about "never" need the whole history,
 * not the last value.
 */
const probes = () => {
  window.__sent = [];
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    try {
      window.__sent.push(JSON.parse(data));
    } catch {
      /* not JSON: not ours */
    }
    return send.call(this, data);
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

// ---- page helpers -------------------------------------------------------------

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
  const before = await page.locator(sel.user).count();
  await page.fill(sel.input, text);
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

/** The demo engine's /markdown answer, as docs/protocol.md holds it (a Go test keeps it equal to the engine's). */
export function demoMarkdown() {
  const doc = fs.readFileSync(path.join(root, 'docs', 'protocol.md'), 'utf8');
  const open = '<!-- demo /markdown: made from internal/engine/demo_markdown.go -->\n````markdown\n';
  const i = doc.indexOf(open);
  if (i < 0) throw new Error('docs/protocol.md holds no /markdown answer');
  const rest = doc.slice(i + open.length);
  return rest.slice(0, rest.indexOf('\n````\n'));
}

// ---- one scenario -------------------------------------------------------------

/**
 * Runs one scenario with its own system and browser, and always leaves a
 * screenshot of every page it named (test-artifacts/e2e/<name>[-page].png)
 * and the process logs, whatever the outcome.
 */
export async function scenario(name, opts, body) {
  fs.mkdirSync(artifacts, { recursive: true });
  const sys = await startSystem(name, opts);
  let browser;
  const shots = new Map();
  try {
    browser = await launchBrowser();
    const ctx = {
      sys,
      browser,
      name,
      newContext: () => newContext(browser, name),
      /** Registers a page for the end-state screenshot. */
      shoot: (page, suffix = '') => shots.set(suffix, page),
      /** Takes a page's screenshot now (for a page closed before the end). */
      snap: async (page, suffix = '') => {
        shots.delete(suffix);
        await page.screenshot({ path: path.join(artifacts, `${name}${suffix ? '-' + suffix : ''}.png`) });
      },
    };
    await body(ctx);
  } finally {
    for (const [suffix, page] of shots) {
      await page.screenshot({ path: path.join(artifacts, `${name}${suffix ? '-' + suffix : ''}.png`), fullPage: false }).catch(() => undefined);
    }
    await browser?.close().catch(() => undefined);
    await sys.stop();
  }
}

// ---- a delaying proxy ---------------------------------------------------------

/**
 * A TCP proxy between the browser and the gateway that can hold what a
 * WebSocket connection sends, in either direction, until released: the way
 * to have a reload happen while a submit is still on its way (up) or its
 * answer is (down). HTTP connections pass untouched. Held bytes of a
 * connection the browser has closed are still delivered on release, as a
 * slow network would, and only then is the gateway side closed.
 */
export async function startHoldProxy(targetPort) {
  const conns = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const c = { client, upstream, ws: null, up: pipe(client, upstream), down: pipe(upstream, client), closed: once(upstream, 'close') };
    conns.add(c);
    const first = (b) => {
      c.ws = b.toString('latin1').startsWith('GET /v1/ws');
    };
    client.once('data', first);
    // Forgotten once both sides are closed: a held connection whose browser
    // side is gone stays until it is released.
    let closed = 0;
    const gone = () => {
      if (++closed === 2) conns.delete(c);
    };
    client.on('close', gone);
    upstream.on('close', () => {
      gone();
      client.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');

  function pipe(src, dst) {
    const p = { held: false, queue: [], srcEnded: false };
    p.endedP = new Promise((r) => (p.onEnd = r));
    src.on('data', (b) => {
      if (p.held) p.queue.push(b);
      else if (!dst.destroyed) dst.write(b);
    });
    const ended = () => {
      if (p.srcEnded) return;
      p.srcEnded = true;
      p.onEnd();
      if (!p.held) dst.end();
    };
    src.on('end', ended);
    src.on('close', ended);
    src.on('error', () => undefined);
    p.release = () => {
      p.held = false;
      for (const b of p.queue.splice(0)) if (!dst.destroyed) dst.write(b);
      if (p.srcEnded) dst.end();
    };
    return p;
  }

  return {
    port: server.address().port,
    /** Holds, from now on, what the open WebSocket connections send in that direction ('up': browser to gateway). */
    hold(direction) {
      let n = 0;
      for (const c of conns) {
        if (c.ws) {
          c[direction].held = true;
          n++;
        }
      }
      return n;
    },
    /** Lets the held bytes go; resolves once the gateway side of those connections has closed, if the browser side had. */
    async release(direction) {
      const waits = [];
      for (const c of conns) {
        if (!c[direction].held) continue;
        c[direction].release();
        if (c.up.srcEnded || c.down.srcEnded) waits.push(c.closed);
      }
      await Promise.all(waits);
    },
    /**
     * Delivers what the browser sent on held connections it has closed since
     * (a submit still on its way when the page went away), without the close
     * frame, and closes the gateway side only once the gateway has answered:
     * so the gateway handles the late message instead of dropping it with
     * the dying connection. Resolves with how many connections it delivered.
     */
    async deliverLate() {
      let n = 0;
      for (const c of [...conns]) {
        if (!c.up.held) continue;
        // The page is going away; its side closes soon.
        await Promise.race([c.up.endedP, new Promise((r) => setTimeout(r, T.short))]);
        if (!c.up.srcEnded) continue;
        const frames = wsFrames(Buffer.concat(c.up.queue.splice(0)));
        c.up.held = false;
        const answered = once(c.upstream, 'data');
        for (const f of frames) if (f.opcode !== 8) c.upstream.write(f.bytes);
        await Promise.race([answered, c.closed, new Promise((r) => setTimeout(r, T.short))]);
        c.upstream.end();
        await c.closed;
        n++;
      }
      return n;
    },
    /** Held connections (including ones the browser has closed since). */
    heldCount(direction) {
      return [...conns].filter((c) => c[direction].held).length;
    },
    async close() {
      for (const c of conns) {
        c.client.destroy();
        c.upstream.destroy();
      }
      server.close();
    },
  };
}

/** Splits client-to-server WebSocket bytes into frames (RFC 6455 section 5.2); a partial tail is one more item. */
function wsFrames(buf) {
  const frames = [];
  let i = 0;
  while (i + 2 <= buf.length) {
    const opcode = buf[i] & 0x0f;
    let len = buf[i + 1] & 0x7f;
    let head = 2;
    if (len === 126) {
      if (i + 4 > buf.length) break;
      len = buf.readUInt16BE(i + 2);
      head = 4;
    } else if (len === 127) {
      if (i + 10 > buf.length) break;
      len = Number(buf.readBigUInt64BE(i + 2));
      head = 10;
    }
    if (buf[i + 1] & 0x80) head += 4;
    const end = i + head + len;
    if (end > buf.length) break;
    frames.push({ opcode, bytes: buf.subarray(i, end) });
    i = end;
  }
  if (i < buf.length) frames.push({ opcode: -1, bytes: buf.subarray(i) });
  return frames;
}

// ---- a proxy that blocks WebSocket ------------------------------------------------

/**
 * A TCP proxy to the gateway that refuses WebSocket upgrades (GET /v1/ws
 * answered 403 and closed), as some corporate proxies and networks do, and
 * passes everything else. unblock() lets upgrades through again; cut() drops
 * every open connection (an SSE stream breaks mid-answer).
 */
export async function startWsBlockingProxy(targetPort) {
  const conns = new Set();
  let blocking = true;
  let refused = 0;
  const server = net.createServer((client) => {
    client.once('data', (first) => {
      if (blocking && first.toString('latin1').startsWith('GET /v1/ws')) {
        refused++;
        client.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      const upstream = net.connect(targetPort, '127.0.0.1');
      const c = { client, upstream };
      conns.add(c);
      upstream.write(first);
      client.pipe(upstream);
      upstream.pipe(client);
      const gone = () => {
        conns.delete(c);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', gone);
      upstream.on('close', gone);
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
    });
    client.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: server.address().port,
    refused: () => refused,
    unblock() {
      blocking = false;
    },
    cut() {
      for (const c of [...conns]) {
        c.client.destroy();
        c.upstream.destroy();
      }
    },
    async close() {
      for (const c of [...conns]) {
        c.client.destroy();
        c.upstream.destroy();
      }
      server.close();
    },
  };
}

// ---- a slow uplink --------------------------------------------------------------

/**
 * A TCP proxy to the gateway that passes what the browser sends at most
 * upBytesPerSec (answers pass at full speed), so a multi-megabyte upload
 * takes long enough for a pause, a closed tab or a lost network to land in
 * the middle of it. When the browser closes a connection (a reload, an
 * abort, a closed tab), what the proxy still held for the gateway is lost,
 * as on a real network, and the gateway sees its request end early.
 * forwarded() counts the bytes that reached the gateway, which is how far an
 * upload really is (the browser counts what left it, and the proxy's
 * buffers run ahead of the gateway).
 */
export async function startThrottleProxy(targetPort, { upBytesPerSec }) {
  const conns = new Set();
  let forwarded = 0;
  const tickMs = 20;
  const perTick = Math.max(1, Math.floor((upBytesPerSec * tickMs) / 1000));
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const queue = [];
    let queued = 0;
    let ended = false;
    const c = {
      destroy() {
        clearInterval(timer);
        client.destroy();
        upstream.destroy();
        conns.delete(c);
      },
    };
    conns.add(c);
    upstream.pipe(client);
    client.on('data', (b) => {
      queue.push(b);
      queued += b.length;
      if (queued > perTick * 8) client.pause();
    });
    const timer = setInterval(() => {
      let budget = perTick;
      while (budget > 0 && queue.length) {
        const b = queue[0];
        const n = Math.min(b.length, budget);
        upstream.write(n === b.length ? b : b.subarray(0, n));
        if (n === b.length) queue.shift();
        else queue[0] = b.subarray(n);
        forwarded += n;
        queued -= n;
        budget -= n;
      }
      if (queued <= perTick * 8) client.resume();
      if (ended && queue.length === 0) {
        clearInterval(timer);
        upstream.end();
      }
    }, tickMs);
    client.on('end', () => (ended = true));
    client.on('close', () => c.destroy());
    upstream.on('close', () => c.destroy());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: server.address().port,
    /** Bytes passed on to the gateway so far. */
    forwarded: () => forwarded,
    /** Drops every open connection at once, as a network that goes away does. */
    cut() {
      for (const c of [...conns]) c.destroy();
    },
    async close() {
      for (const c of [...conns]) c.destroy();
      server.close();
    },
  };
}
