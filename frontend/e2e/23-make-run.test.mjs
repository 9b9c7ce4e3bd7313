// Scenario 23: `make run` as a new user runs it (scripts/run.sh on the built
// binaries, as `make run` starts it after `make build`). The README leads
// with "kill the runner while it streams": the runner, then the gateway, are
// killed with SIGKILL by the pids in the run directory in the middle of one
// answer. Each is started again, the others keep running, and the page ends
// with the exact answer. Then a Ctrl-C (SIGINT) stops everything with status
// 0, so make prints no "Error".
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { T, answerText, artifacts, freePort, launchBrowser, newContext, openApp, root, send, streamText, waitStatus, waitUntil } from './harness.mjs';
import { Proc } from './harness/processes.mjs';
import { createDatabase } from './harness/sql.mjs';

const N = 400;
const name = '23-make-run';

const tokens = (s) => s.match(/t\d+ /g)?.length ?? 0;
const pidIn = (dir, part) => Number(fs.readFileSync(path.join(dir, `${part}.pid`), 'utf8').trim());
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('make run: the runner and the gateway killed with -9 mid-answer come back, the answer ends exact, Ctrl-C ends quietly', { timeout: 240_000 }, async () => {
  const database = await createDatabase(process.env.TEST_DATABASE_URL, name);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tether-e2e-run-'));
  const runDir = path.join(tmp, 'run');
  // run.sh checks /readyz on the port it is given and hands the runner the
  // NATS address, so both are fixed here (a port 0 would not tell it where).
  const port = await freePort();
  const natsPort = await freePort();
  const run = new Proc(name, path.join(root, 'scripts', 'run.sh'), [], {
    DATABASE_URL: database.url,
    TETHER_ADDR: `127.0.0.1:${port}`,
    TETHER_NATS_LISTEN: `127.0.0.1:${natsPort}`,
    TETHER_DATA_DIR: path.join(tmp, 'data'),
    TETHER_RUN_DIR: runDir,
    TETHER_RATE: '0',
    TETHER_LEASE: '2s',
    TETHER_SESSION_KEY: 'e2e-session-key-that-is-long-enough-0123456789',
  });
  let browser;
  try {
    await run.match(/Tether is running/, { timeout: T.long, what: 'its banner' });
    browser = await launchBrowser();
    const context = await newContext(browser, name);
    const page = await context.newPage();
    await openApp(page, `http://127.0.0.1:${port}`);

    const id = await send(page, `/stream ${N} 20`);
    await waitUntil(async () => tokens(await answerText(page, id)) >= 40, { what: 'the first tokens' });

    // kill -9 the runner answering: it is started again, and the task goes
    // on as attempt 2 once its lease has run out.
    const runner = pidIn(runDir, 'runner');
    process.kill(runner, 'SIGKILL');
    await run.match(/run: the runner exited \(status 137\); starting it again/, { what: 'the runner started again' });
    const atRunnerKill = tokens(await answerText(page, id));
    assert.ok(atRunnerKill < N, `the runner was killed mid-answer (${atRunnerKill} tokens shown)`);
    await waitUntil(async () => tokens(await answerText(page, id)) > atRunnerKill + 20, { what: 'the answer going on after the runner was killed' });

    // kill -9 the gateway, and the NATS embedded in it: the page reconnects
    // to the gateway started again, and the answer carries on.
    const gateway = pidIn(runDir, 'gateway');
    process.kill(gateway, 'SIGKILL');
    await run.match(/run: the gateway exited \(status 137\); starting it again/, { what: 'the gateway started again' });
    const atGatewayKill = tokens(await answerText(page, id));
    assert.ok(atGatewayKill < N, `the gateway was killed mid-answer (${atGatewayKill} tokens shown)`);

    await waitStatus(page, id, 'done', 120_000);
    assert.equal(await answerText(page, id), streamText(N), 'the answer is exact');
    assert.notEqual(pidIn(runDir, 'runner'), runner, 'a new runner');
    assert.notEqual(pidIn(runDir, 'gateway'), gateway, 'a new gateway');
    await page.screenshot({ path: path.join(artifacts, `${name}.png`) });
    const parts = [pidIn(runDir, 'gateway'), pidIn(runDir, 'runner')];

    // Ctrl-C: the terminal signals the whole group; the script's own part is
    // the SIGINT it gets, and it stops the rest itself.
    process.kill(run.pid, 'SIGINT');
    const { code, signal } = await run.exited;
    assert.equal(code, 0, `run.sh exited with status 0 on Ctrl-C (got ${code}, signal ${signal})`);
    assert.match(run.out, /run: stopped/);
    for (const pid of parts) assert.ok(!alive(pid), `part ${pid} stopped with run.sh`);
    assert.deepEqual(fs.readdirSync(runDir).filter((f) => f.endsWith('.pid')), [], 'no pid file left');
  } finally {
    await browser?.close().catch(() => undefined);
    await run.stop();
    for (const part of ['gateway', 'runner']) {
      try {
        const pid = pidIn(runDir, part);
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      } catch {
        /* no pid file: stopped */
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
    await database.drop();
  }
});
