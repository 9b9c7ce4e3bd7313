// Postgres through psql: a database per scenario, and queries the scenarios
// check the system with.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** Runs SQL with psql and returns its unaligned, tuples-only output (fields split on '|'). */
export async function psql(url, query) {
  const { stdout } = await execFileP('psql', [url, '-X', '-q', '-t', '-A', '-v', 'ON_ERROR_STOP=1', '-c', query], { timeout: 30_000 });
  return stdout.trim();
}

export async function sqlRows(url, query) {
  const out = await psql(url, query);
  return out === '' ? [] : out.split('\n').map((l) => l.split('|'));
}

/** Creates a fresh database on base's server for the scenario name; returns its URL and a drop function. */
export async function createDatabase(base, name) {
  const dbName = `tether_e2e_${name.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  await psql(base, `CREATE DATABASE ${dbName}`);
  const u = new URL(base);
  u.pathname = `/${dbName}`;
  return {
    url: u.toString(),
    drop: () => psql(base, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined),
  };
}
