// Helpers for scenario 19: the official `openai` npm client against the real
// system (PROTOCOL.md section 11, docs/protocol.md "The APIs apps already
// use"). No browser: the client runs in the test process.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import OpenAI from 'openai';

export { OpenAI };

/** A fresh API key: in anonymous mode each value is a user of its own. */
export function newKey() {
  return `test-key-${crypto.randomBytes(8).toString('hex')}`;
}

/** The anonymous user id a non-JWT API key names (docs/protocol.md, Keys). */
export function userOfKey(apiKey) {
  return `key-${crypto.createHash('sha256').update(`tether api key\x00${apiKey}`).digest('hex').slice(0, 32)}`;
}

const NS = '5f6d1c0e-8a43-4d8e-9a51-7e2b3c4d5e6f';

/** UUIDv5 (RFC 9562) of name in namespace ns. */
export function uuidv5(name, ns = NS) {
  const nsBytes = Buffer.from(ns.replace(/-/g, ''), 'hex');
  const h = crypto.createHash('sha1').update(nsBytes).update(Buffer.from(name, 'utf8')).digest();
  const b = Buffer.from(h.subarray(0, 16));
  b[6] = (b[6] & 0x0f) | 0x50;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = b.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** The task id the server makes of an Idempotency-Key that is not a UUID. */
export function taskIdOfKey(apiKey, key) {
  return uuidv5(`${userOfKey(apiKey)}\nidempotency-key\n${key}`);
}

/**
 * A client of the gateway. Every request it sends is recorded in
 * client.sent ({method, url, headers}), so a test can see what the SDK
 * itself put on the wire.
 */
export function newClient(sys, { apiKey = newKey(), maxRetries = 0, ...opts } = {}) {
  const sent = [];
  const c = new OpenAI({
    baseURL: `${sys.base}/v1`,
    apiKey,
    maxRetries,
    timeout: 120_000,
    fetch: (url, init) => {
      sent.push({ method: init?.method ?? 'GET', url: String(url), headers: new Headers(init?.headers) });
      return fetch(url, init);
    },
    ...opts,
  });
  c.sent = sent;
  c.key = apiKey;
  c.user = userOfKey(apiKey);
  return c;
}

/**
 * Request options that carry an Idempotency-Key. openai 6.49.0 takes an
 * `idempotencyKey` option but never puts it on the wire (its client sets no
 * idempotency header name; the scenario checks that), so the key goes in
 * `headers` too, as an app has to do with this client.
 */
export function idem(key) {
  return { idempotencyKey: key, headers: { 'Idempotency-Key': key } };
}

export const bytes = (s) => Buffer.byteLength(s, 'utf8');

/** Reads a stream to its end; returns its items. */
export async function readAll(stream) {
  const out = [];
  for await (const x of stream) out.push(x);
  return out;
}

/**
 * Reads up to n items of a Stream, then cuts it the way an app does
 * (stream.controller.abort()). Returns the items read.
 */
export async function readThenAbort(stream, n) {
  const it = stream[Symbol.asyncIterator]();
  const got = [];
  while (got.length < n) {
    const r = await it.next();
    if (r.done) break;
    got.push(r.value);
  }
  stream.controller.abort();
  await it.return?.().catch(() => undefined);
  return got;
}

/** The Responses event types in their order, deltas collapsed to one entry. */
export function shape(events) {
  const out = [];
  for (const e of events) {
    const t = e.type === 'response.output_text.delta' ? 'delta*' : e.type;
    if (t === 'delta*' && out[out.length - 1] === 'delta*') continue;
    out.push(t);
  }
  return out;
}

export const COMPLETED_SHAPE = [
  'response.created',
  'response.in_progress',
  'response.output_item.added',
  'response.content_part.added',
  'delta*',
  'response.output_text.done',
  'response.content_part.done',
  'response.output_item.done',
  'response.completed',
];

/**
 * The sequence number section 11.1 gives each event of an answer whose
 * whole text is `full`, where `endBytes` is the byte offset at the end of
 * this event's delta (deltas only).
 */
export function ruleSeq(type, endBytes, full) {
  const L = bytes(full);
  switch (type) {
    case 'response.created':
      return 0;
    case 'response.in_progress':
      return 1;
    case 'response.output_item.added':
      return 2;
    case 'response.content_part.added':
      return 3;
    case 'response.output_text.delta':
      return 3 + endBytes;
    case 'response.output_text.done':
      return L + 4;
    case 'response.content_part.done':
      return L + 5;
    case 'response.output_item.done':
      return L + 6;
    case 'response.completed':
    case 'response.failed':
    case 'response.incomplete':
      return L + 7;
    default:
      return undefined;
  }
}

/**
 * Checks one sequence of Responses events (a whole stream, or the part
 * before a cut joined to the resumed part): numbers strictly increasing,
 * each the number section 11.1 gives it, deltas joining to `full` from
 * byte `startBytes` on. Returns the joined delta text.
 */
export function checkNumbering(events, full, { startBytes = 0, what = 'stream' } = {}) {
  let text = '';
  let prev = -Infinity;
  for (const [i, e] of events.entries()) {
    assert.notEqual(e.type, 'error', `${what}: an error event: ${JSON.stringify(e)}`);
    assert.equal(typeof e.sequence_number, 'number', `${what}: event ${i} (${e.type}) has a sequence_number`);
    assert.ok(e.sequence_number > prev, `${what}: event ${i} (${e.type}) numbered ${e.sequence_number} after ${prev}`);
    prev = e.sequence_number;
    if (e.type === 'response.output_text.delta') {
      text += e.delta;
      assert.equal(e.output_index, 0, `${what}: delta output_index`);
      assert.equal(e.content_index, 0, `${what}: delta content_index`);
    }
    const want = ruleSeq(e.type, startBytes + bytes(text), full);
    assert.equal(e.sequence_number, want, `${what}: event ${i} ${e.type} (text so far ${bytes(text)} bytes after ${startBytes}) numbered ${e.sequence_number}, section 11.1 gives ${want}`);
  }
  return text;
}

/** Percentile (nearest rank) of a list of numbers. */
export function pct(xs, p) {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Expects fn to throw an OpenAI APIError of class cls (or any APIError when cls is null) with the given fields. */
export async function expectAPIError(fn, cls, fields = {}, what = 'request') {
  let err;
  try {
    const r = await fn();
    // A stream that opened: read it, an error may come as its first item.
    if (r && typeof r[Symbol.asyncIterator] === 'function') await readAll(r);
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${what}: expected ${cls?.name ?? 'an APIError'}, it succeeded`);
  assert.ok(err instanceof OpenAI.APIError, `${what}: expected an APIError, got ${err?.constructor?.name}: ${err?.message}`);
  if (cls) assert.ok(err instanceof cls, `${what}: expected ${cls.name}, got ${err.constructor.name} (status ${err.status}): ${err.message}`);
  for (const [k, v] of Object.entries(fields)) {
    if (v instanceof RegExp) assert.match(String(err[k]), v, `${what}: error.${k}`);
    else assert.equal(err[k], v, `${what}: error.${k} (${err.message})`);
  }
  return err;
}

/**
 * A seeded generator (mulberry32): the seed is SEED from the environment or a
 * random one, printed with the figures so a failing run can be repeated.
 */
export function seeded(seed = Number(process.env.SEED || Math.floor(Math.random() * 2 ** 31))) {
  let state = seed >>> 0;
  const rnd = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let x = state;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  return { seed, rnd, randInt: (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1)) };
}
