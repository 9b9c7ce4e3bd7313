// Child processes: started with their output in test-artifacts/e2e/logs/,
// tracked by PID and stopped by PID (SIGTERM, then SIGKILL), never outliving
// a run.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { logDir } from './paths.mjs';
import { T, waitUntil } from './wait.mjs';

/**
 * A port that was free a moment ago. Another process can take it before it
 * is used, so the harness itself no longer uses it: its servers listen on
 * port 0 and report the port they got (Proc.match). Kept for scripts that
 * import it.
 */
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

/** Bytes of a process's output kept in memory for match (the rest is in its log file). */
const keptOutput = 1 << 16;

/** A child process whose stdout and stderr go to a log file, stopped by PID. */
export class Proc {
  constructor(name, file, args, env) {
    this.name = name;
    this.logPath = path.join(logDir, `${name}.log`);
    fs.mkdirSync(logDir, { recursive: true });
    this.log = fs.createWriteStream(this.logPath, { flags: 'a' });
    this.log.write(`==== ${new Date().toISOString()} start ${file} ${args.join(' ')}\n`);
    this.out = '';
    this.watchers = new Set();
    this.child = spawn(file, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.pid = this.child.pid;
    live.add(this);
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        live.delete(this);
        this.exitCode = code;
        this.exitSignal = signal;
        this.log.write(`==== ${new Date().toISOString()} exit code=${code} signal=${signal}\n`);
        this.notify();
        resolve({ code, signal });
      });
      this.child.on('error', (err) => {
        live.delete(this);
        this.log.write(`==== spawn error: ${err.message}\n`);
        this.exitCode = -1;
        this.notify();
        resolve({ code: -1, signal: null });
      });
    });
    for (const s of [this.child.stdout, this.child.stderr]) {
      s.on('data', (b) => {
        this.log.write(b);
        if (this.out.length < keptOutput) this.out += b.toString();
        this.notify();
      });
    }
  }

  get running() {
    return this.exitCode === undefined;
  }

  notify() {
    for (const w of this.watchers) w();
  }

  /**
   * Resolves with the match of re in what the process has printed (stdout
   * and stderr, its first 64 KiB), as soon as it prints it: how the harness
   * learns the address a server chose. Rejects if the process exits first
   * or nothing matches within timeout.
   */
  match(re, { timeout = T.long, what = String(re) } = {}) {
    return new Promise((resolve, reject) => {
      const done = (f, v) => {
        clearTimeout(timer);
        this.watchers.delete(check);
        f(v);
      };
      const check = () => {
        const m = this.out.match(re);
        if (m) done(resolve, m);
        else if (!this.running) done(reject, new Error(`${this.name} exited (${this.exitCode}) before printing ${what}; log:\n${this.tail()}`));
      };
      const timer = setTimeout(() => done(reject, new Error(`${this.name} did not print ${what} within ${timeout}ms; log:\n${this.tail()}`)), timeout);
      this.watchers.add(check);
      check();
    });
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

/** Waits until proc answers 200 on base/readyz. */
export async function waitReady(proc, base) {
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
