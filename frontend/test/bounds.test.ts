import { describe, expect, it } from 'vitest';
import { TetherClient } from '../src/lib/client';
import { Connection } from '../src/lib/connection';
import { NotConnectedError } from '../src/lib/errors';
import { StorageKeys } from '../src/lib/storage';
import { FakePlatform, MemoryStorage, mkTask, seqUUID } from './fakes';

describe('Connection queue', () => {
  it('holds at most maxQueued requests waiting for the connection and fails the next at once', async () => {
    const p = new FakePlatform();
    const c = new Connection({ url: 'ws://x/v1/ws', platform: p, pingIntervalMs: 0, maxQueued: 2 });
    c.start();
    const a = c.request({ type: 'ping' }, { wait: true });
    const b = c.request({ type: 'ping' }, { wait: true });
    const over = c.request({ type: 'ping' }, { wait: true });
    await expect(over).rejects.toBeInstanceOf(NotConnectedError);
    await expect(over).rejects.toThrow(/too many requests waiting/);
    expect(c.queued).toBe(2);
    p.socket.open();
    expect(c.queued).toBe(0);
    const sent = p.socket.ofType('ping');
    expect(sent).toHaveLength(2);
    for (const m of sent) p.socket.push({ type: 'pong', req: m.req });
    await expect(Promise.all([a, b])).resolves.toHaveLength(2);
  });
});

function setup(opts: { maxTasks?: number; storage?: MemoryStorage } = {}) {
  const p = new FakePlatform();
  const storage = opts.storage ?? new MemoryStorage();
  const client = new TetherClient({ platform: p, storage, channel: null, uuid: seqUUID(), url: 'ws://x/v1/ws', pingIntervalMs: 0, maxTasks: opts.maxTasks });
  const notices: string[] = [];
  client.events.on('notice', (n) => notices.push(`${n.text} ${n.detail ?? ''}`));
  const started = client.start();
  return { p, client, storage, started, notices };
}

/** A tab reloaded while task tA of conversation c1 ran: it subscribes to tA. */
function restoring() {
  const storage = new MemoryStorage();
  storage.setItem(StorageKeys.conversation, 'c1');
  storage.setItem(StorageKeys.active, JSON.stringify({ task_id: 'tA', conversation_id: 'c1' }));
  const t = setup({ storage });
  t.p.socket.open();
  return t;
}

describe('TetherClient subscribe errors', () => {
  it('does not retry a subscribe refused for good, and shows why', () => {
    const { p, client, notices } = restoring();
    const sub = p.socket.ofType('subscribe').find((m) => m.task_id === 'tA')!;
    p.socket.push({ type: 'error', req: sub.req, code: 'invalid', message: 'task_id is not a UUID' });
    p.advance(10 * 60_000);
    expect(p.socket.ofType('subscribe').filter((m) => m.task_id === 'tA')).toHaveLength(1);
    expect(client.subscriptions.get('tA')).toBeUndefined();
    expect(client.taskState('tA')?.localError).toMatchObject({ code: 'invalid', retryable: false });
    expect(notices.some((n) => n.includes('task_id is not a UUID'))).toBe(true);
  });

  it('retries a passing refusal with backoff, a bounded number of times, then shows why', () => {
    const { p, client } = restoring();
    const times: number[] = [];
    for (;;) {
      const subs = p.socket.ofType('subscribe').filter((m) => m.task_id === 'tA');
      if (subs.length > times.length) {
        times.push(p.now());
        p.socket.push({ type: 'error', req: subs[subs.length - 1]!.req, code: 'unavailable', message: 'database unavailable' });
        continue;
      }
      if (p.now() > 1_000_000 + 30 * 60_000) break;
      p.advance(1000);
    }
    expect(times).toHaveLength(1 + 8); // the first and eight retries
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(gaps).toEqual([2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000]);
    expect(client.taskState('tA')?.localError).toMatchObject({ code: 'unavailable', retryable: true });
  });

  it('starts counting again after a snapshot', () => {
    const { p, client } = restoring();
    const first = p.socket.ofType('subscribe').find((m) => m.task_id === 'tA')!;
    p.socket.push({ type: 'error', req: first.req, code: 'rate_limited', message: 'slow down' });
    p.advance(2000);
    const second = p.socket.ofType('subscribe').filter((m) => m.task_id === 'tA')[1]!;
    p.socket.push({ type: 'snapshot', req: second.req, task: mkTask({ id: 'tA', conversation_id: 'c1', status: 'running', seq: 3 }) });
    expect(client.subscriptions.get('tA')?.state).toBe('subscribed');
    expect(client.taskState('tA')?.localError).toBeUndefined();
  });
});

describe('TetherClient tasks', () => {
  it('forgets finished tasks the open conversation does not show, beyond maxTasks', async () => {
    const { p, client, started } = setup({ maxTasks: 3 });
    p.socket.open();
    const h = p.socket.ofType('history')[0]!;
    p.socket.push({ type: 'history', req: h.req, messages: [], next: null });
    await started;
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      client.newConversation();
      const id = client.submit(`question ${i}`);
      ids.push(id);
      const s = p.socket.ofType('submit').find((m) => m.task_id === id)!;
      const conv = s.conversation_id;
      p.socket.push({ type: 'submitted', req: s.req, created: true, task: mkTask({ id, conversation_id: conv, status: 'pending', seq: 1 }) });
      p.socket.push({ type: 'status', task_id: id, seq: 2, status: 'done', attempt: 1, error: null, result_ref: null });
    }
    const known = ids.filter((id) => client.taskState(id) !== undefined);
    expect(known.length).toBeLessThanOrEqual(3);
    expect(known).toContain(ids[9]); // the open conversation's
    expect(client.taskState(ids[0]!)).toBeUndefined();
  });
});
