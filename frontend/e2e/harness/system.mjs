// The system under test: a fresh Postgres database, the gateway binary with
// embedded NATS, and runners, one of each set per scenario.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bin } from './paths.mjs';
import { Proc, waitReady } from './processes.mjs';
import { createDatabase, psql, sqlRows } from './sql.mjs';
import { T } from './wait.mjs';

/** What cmd/gateway prints once it listens, and logs once its embedded NATS runs. */
const listening = /Tether gateway listening on http:\/\/127\.0\.0\.1:(\d+)/;
const natsStarted = /"msg":"embedded NATS started","url":"nats:\/\/127\.0\.0\.1:(\d+)"/;

/**
 * Starts a gateway and waits until it answers /readyz. Its addresses are
 * port 0 unless env pins them: the gateway picks free ports itself and the
 * harness reads back the ones it got (no port is chosen here and then
 * taken by another process before the gateway binds it). Returns the proc
 * and its HTTP port and, if it embeds NATS, its NATS port.
 */
async function startGateway(name, env) {
  const proc = new Proc(name, bin('gateway'), [], { TETHER_ADDR: '127.0.0.1:0', ...env });
  const [, port] = await proc.match(listening, { what: 'its address' });
  let natsPort;
  if (!env.NATS_URL) [, natsPort] = await proc.match(natsStarted, { what: 'the address of its NATS' });
  await waitReady(proc, `http://127.0.0.1:${port}`);
  return { proc, port: Number(port), natsPort: natsPort && Number(natsPort) };
}

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
  const database = await createDatabase(base, name);
  const db = database.url;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tether-e2e-'));
  const procs = [];
  let gatewayEnv;
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
    /**
     * Starts the web gateway and waits for /readyz: the first time on ports
     * it picks, then again on the same ones (tabs and runners come back to
     * the address they knew).
     */
    async startGateway() {
      const g = await startGateway(`${name}-gateway`, gatewayEnv);
      procs.push(g.proc);
      sys.gateway = g.proc;
      if (!sys.port) {
        sys.port = g.port;
        sys.base = `http://127.0.0.1:${g.port}`;
        gatewayEnv = { ...gatewayEnv, TETHER_ADDR: `127.0.0.1:${g.port}` };
        if (g.natsPort) gatewayEnv.TETHER_NATS_LISTEN = `127.0.0.1:${g.natsPort}`;
      }
      return g;
    },
    async stop() {
      // Runner first (it drains), then the gateways, NATS owner last.
      for (const p of [...procs].reverse()) await p.stop();
      fs.rmSync(tmp, { recursive: true, force: true });
      await database.drop();
    },
  };
  try {
    const common = {
      DATABASE_URL: db,
      TETHER_RATE: '0',
      TETHER_SESSION_KEY: 'e2e-session-key-that-is-long-enough-0123456789',
      TETHER_LOG_LEVEL: 'debug',
      ...env,
    };
    let natsURL;
    if (separateNats) {
      const owner = await startGateway(`${name}-nats-gateway`, {
        ...common,
        TETHER_NATS_LISTEN: '127.0.0.1:0',
        TETHER_DATA_DIR: path.join(tmp, 'nats-owner'),
        NATS_URL: '',
      });
      procs.push(owner.proc);
      natsURL = `nats://127.0.0.1:${owner.natsPort}`;
      gatewayEnv = { ...common, TETHER_DATA_DIR: path.join(tmp, 'gateway'), NATS_URL: natsURL };
      await sys.startGateway();
    } else {
      gatewayEnv = { ...common, TETHER_DATA_DIR: path.join(tmp, 'gateway'), TETHER_NATS_LISTEN: '127.0.0.1:0', NATS_URL: '' };
      const g = await sys.startGateway();
      natsURL = `nats://127.0.0.1:${g.natsPort}`;
    }
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
    for (const runner of sys.runners) await runner.match(/engine demo/, { timeout: T.long, what: 'its banner' });
    sys.runner = sys.runners[0];
    return sys;
  } catch (err) {
    await sys.stop().catch(() => undefined);
    throw err;
  }
}
