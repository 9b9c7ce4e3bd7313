import { describe, expect, it, vi } from 'vitest';
import { Connection } from '../src/lib/connection';
import { browserSharing, SharedConnection } from '../src/lib/shared';
import { followerStep, Interest, isLinkMessage, planRequest, refused, strictestLiveness } from '../src/lib/sharing';
import { Subscriptions } from '../src/lib/subscription';
import type { ServerMessage } from '../src/lib/protocol';
import { TetherClient } from '../src/lib/client';
import { FakeElector, FakeLinkHub, FakePlatform, MemoryStorage, mkTask, seqUUID } from './fakes';

describe('per-task interest on the shared socket', () => {
  it('sends an unsubscribe only for the last tab that follows the task', () => {
    const i = new Interest();
    expect(planRequest(i, 'A', { type: 'subscribe', task_id: 't1' })).toEqual({ kind: 'forward' });
    expect(planRequest(i, 'B', { type: 'submit', task_id: 't1', conversation_id: 'c1', content: 'x' })).toEqual({ kind: 'forward' });
    // Subscribing again from the same tab counts once.
    planRequest(i, 'A', { type: 'subscribe', task_id: 't1' });
    expect(i.tabs('t1').sort()).toEqual(['A', 'B']);
    expect(planRequest(i, 'A', { type: 'unsubscribe', task_id: 't1' })).toEqual({ kind: 'answer', reply: { type: 'unsubscribed', task_id: 't1' } });
    expect(planRequest(i, 'B', { type: 'unsubscribe', task_id: 't1' })).toEqual({ kind: 'forward' });
    expect(i.tabs('t1')).toEqual([]);
    expect(planRequest(i, 'A', { type: 'cancel', task_id: 't1' })).toEqual({ kind: 'forward' });
  });

  it('drops a tab that went: what it alone followed is unsubscribed', () => {
    const i = new Interest();
    i.add('t1', 'A');
    i.add('t1', 'B');
    i.add('t2', 'B');
    expect(i.dropTab('B')).toEqual(['t2']);
    expect(i.tabs('t1')).toEqual(['A']);
  });

  it('a refused subscribe holds nothing for that tab', () => {
    const i = new Interest();
    const msg = { type: 'subscribe', task_id: 't1' } as const;
    planRequest(i, 'A', msg);
    refused(i, 'A', msg, { type: 'error', code: 'not_found', message: '' } as ServerMessage);
    expect(i.tabs('t1')).toEqual([]);
    planRequest(i, 'A', msg);
    refused(i, 'A', msg, { type: 'snapshot', task: mkTask() } as ServerMessage);
    expect(i.tabs('t1')).toEqual(['A']);
  });
});

describe('a follower hearing from a leader', () => {
  const open = { kind: 'open', transport: 'websocket' } as const;
  const connecting = { kind: 'connecting', retry: false } as const;
  it('the first leader, open: subscribe everything', () => {
    expect(followerStep(null, 'L', connecting, open)).toEqual({ failPending: true, states: [open], open: true, greet: true });
  });
  it('the same leader, still open: nothing to redo', () => {
    expect(followerStep('L', 'L', open, open)).toEqual({ failPending: false, states: [open], open: false, greet: false });
  });
  it('the leader lost its socket: pending requests fail, the tab shows it', () => {
    const r = { kind: 'reconnecting', delayMs: 1000, retryAt: 5, reason: 'x', code: 1006 } as const;
    expect(followerStep('L', 'L', open, r)).toEqual({ failPending: true, states: [r], open: false, greet: false });
    expect(followerStep('L', 'L', r, open).open).toBe(true);
  });
  it('a new leader: what the old one was asked fails, and the tab passes through connecting', () => {
    expect(followerStep('L', 'M', open, connecting)).toEqual({ failPending: true, states: [connecting], open: false, greet: true });
    // Heard only once the new socket is open: still detaches first, then subscribes again.
    const s = followerStep('L', 'M', open, open);
    expect(s.states.map((x) => x.kind)).toEqual(['connecting', 'open']);
    expect(s.open).toBe(true);
  });
  it('a leader that stopped reads as connecting (the next one comes)', () => {
    expect(followerStep('L', 'L', open, { kind: 'idle' }).states).toEqual([{ kind: 'connecting', retry: true }]);
  });
});

describe('liveness and messages', () => {
  it('the socket pings as often as the most demanding tab asks', () => {
    expect(strictestLiveness([])).toBeNull();
    expect(strictestLiveness([{ intervalMs: 25_000, timeoutMs: 10_000 }, { intervalMs: 5_000, timeoutMs: 3_000 }])).toEqual({ intervalMs: 5_000, timeoutMs: 3_000 });
    expect(strictestLiveness([{ intervalMs: 0, timeoutMs: 10_000 }, { intervalMs: 0, timeoutMs: 10_000 }])).toEqual({ intervalMs: 0, timeoutMs: 10_000 });
  });
  it('reads only link messages off the channel', () => {
    expect(isLinkMessage({ t: 'req', from: 'A', to: 'L', id: 1, msg: { type: 'ping' } })).toBe(true);
    expect(isLinkMessage({ kind: 'submit', task_id: 'x' })).toBe(false);
    expect(isLinkMessage({ t: 'reply', to: 'A', id: '1', msg: {} })).toBe(false);
  });
});

/** Tabs of one browser: one platform (its sockets are the browser's), one channel, one lock. */
function browser() {
  const platform = new FakePlatform();
  const hub = new FakeLinkHub();
  const locks = new FakeElector();
  const tabs: Tab[] = [];
  const tab = (name: string): Tab => {
    const bus = hub.bus();
    const shared = new SharedConnection({
      tab: name,
      bus,
      elector: locks.elector(),
      platform,
      connect: () => new Connection({ url: 'ws://test/v1/ws', platform, pingIntervalMs: 0 }),
    });
    const subs = new Subscriptions(shared);
    const messages: ServerMessage[] = [];
    shared.events.on('message', (m) => messages.push(m));
    const t = { name, bus, shared, subs, messages, kill: () => bus.close() };
    tabs.push(t);
    shared.start();
    return t;
  };
  const settle = async () => {
    for (let i = 0; i < 5; i++) {
      await Promise.resolve();
      hub.deliver();
    }
  };
  return { platform, hub, locks, tab, tabs, settle };
}
type Tab = { name: string; shared: SharedConnection; subs: Subscriptions; messages: ServerMessage[]; kill: () => void; bus: { close(): void } };

const reqOf = (m: unknown) => (m as { req: string }).req;
const text = (t: Tab, id = 't1') => t.subs.get(id)?.task?.output;

describe('one socket per browser', () => {
  it('three tabs, one socket; a reply goes to the tab that asked, events to every tab that follows', async () => {
    const b = browser();
    const A = b.tab('A');
    await b.settle();
    const B = b.tab('B');
    const C = b.tab('C');
    await b.settle();
    expect(b.platform.sockets).toHaveLength(1);
    expect([A, B, C].map((t) => t.shared.isLeader)).toEqual([true, false, false]);
    expect(B.shared.state.kind).toBe('connecting');
    b.platform.socket.open();
    await b.settle();
    expect([A, B, C].map((t) => t.shared.state.kind)).toEqual(['open', 'open', 'open']);

    B.subs.follow('t1');
    await b.settle();
    const s = b.platform.socket;
    const sub = s.last('subscribe');
    expect(sub.task_id).toBe('t1');
    s.push({ type: 'snapshot', req: reqOf(sub), task: mkTask({ seq: 2, output: 'ab' }) }, { type: 'delta', task_id: 't1', seq: 3, attempt: 1, text: 'c' });
    await b.settle();
    expect(B.subs.get('t1')?.state).toBe('subscribed');
    expect(text(B)).toBe('abc');
    expect(A.subs.get('t1')).toBeUndefined();
    expect(C.subs.get('t1')).toBeUndefined();
    // A user-wide task event reaches every tab.
    s.push({ type: 'task', task: mkTask({ id: 't9' }) });
    await b.settle();
    for (const t of [A, B, C]) expect(t.messages.some((m) => m.type === 'task')).toBe(true);
  });

  it('a tab that unfollows never ends another tab’s stream', async () => {
    const b = browser();
    const A = b.tab('A');
    const B = b.tab('B');
    const C = b.tab('C');
    await b.settle();
    const s = b.platform.socket;
    s.open();
    await b.settle();
    for (const t of [A, B, C]) t.subs.follow('t1');
    await b.settle();
    const subs = s.ofType('subscribe');
    expect(subs).toHaveLength(3);
    s.push(...subs.map((m) => ({ type: 'snapshot', req: reqOf(m), task: mkTask({ seq: 1, output: 'a' }) }) as ServerMessage));
    await b.settle();
    A.subs.unfollow('t1');
    B.subs.unfollow('t1');
    await b.settle();
    expect(s.ofType('unsubscribe')).toHaveLength(0);
    s.push({ type: 'delta', task_id: 't1', seq: 2, attempt: 1, text: 'b' });
    await b.settle();
    expect(text(C)).toBe('ab');
    C.subs.unfollow('t1');
    await b.settle();
    expect(s.ofType('unsubscribe').map((m) => m.task_id)).toEqual(['t1']);
  });

  it('a tab that goes says goodbye: what it alone followed is unsubscribed', async () => {
    const b = browser();
    b.tab('A');
    const B = b.tab('B');
    await b.settle();
    const s = b.platform.socket;
    s.open();
    await b.settle();
    B.subs.follow('t2');
    await b.settle();
    B.shared.leave();
    await b.settle();
    expect(s.ofType('unsubscribe').map((m) => m.task_id)).toEqual(['t2']);
  });

  it('the leader tab closes mid-answer: another leads, every tab resubscribes and ends with the exact text', async () => {
    const b = browser();
    const A = b.tab('A');
    const B = b.tab('B');
    const C = b.tab('C');
    await b.settle();
    const s1 = b.platform.socket;
    s1.open();
    await b.settle();
    for (const t of [A, B, C]) t.subs.follow('t1');
    await b.settle();
    s1.push(...s1.ofType('subscribe').map((m) => ({ type: 'snapshot', req: reqOf(m), task: mkTask({ seq: 1, output: 't1 ' }) }) as ServerMessage));
    s1.push({ type: 'delta', task_id: 't1', seq: 2, attempt: 1, text: 't2 ' });
    await b.settle();
    expect([A, B, C].map((t) => text(t))).toEqual(['t1 t2 ', 't1 t2 ', 't1 t2 ']);
    // C asks something the old leader will never answer.
    let failed: Error | null = null;
    C.shared.send({ type: 'history', conversation_id: 'c1' }, { onReply: () => {}, onFail: (e) => (failed = e) });

    // A's page goes: its channel and socket with it, and the browser frees the lock.
    A.kill();
    s1.readyState = 3;
    b.locks.killHolder();
    await b.settle();
    expect(B.shared.isLeader).toBe(true);
    expect(b.platform.sockets).toHaveLength(2);
    expect(C.shared.state.kind).toBe('connecting');
    expect(failed).not.toBeNull();
    expect(C.subs.get('t1')?.state).toBe('unsubscribed');

    const s2 = b.platform.socket;
    s2.open();
    await b.settle();
    const again = s2.ofType('subscribe');
    expect(again).toHaveLength(2);
    // Meanwhile the answer went on: the fresh snapshots hold it all, then the stream continues.
    s2.push(...again.map((m) => ({ type: 'snapshot', req: reqOf(m), task: mkTask({ seq: 4, output: 't1 t2 t3 t4 ' }) }) as ServerMessage));
    s2.push({ type: 'delta', task_id: 't1', seq: 5, attempt: 1, text: 't5 ' });
    s2.push({ type: 'status', task_id: 't1', seq: 6, attempt: 1, status: 'done', error: null, result_ref: null });
    await b.settle();
    for (const t of [B, C]) {
      expect(text(t)).toBe('t1 t2 t3 t4 t5 ');
      expect(t.subs.get('t1')?.task?.status).toBe('done');
      expect(t.shared.state.kind).toBe('open');
    }
  });

  it('a submit whose leader died before the reply is sent again, same id, by the next leader', async () => {
    const b = browser();
    const A = b.tab('A');
    const B = b.tab('B');
    await b.settle();
    const s1 = b.platform.socket;
    s1.open();
    await b.settle();
    B.subs.follow('t7', { task_id: 't7', conversation_id: 'c1', content: 'hi' });
    await b.settle();
    expect(s1.last('submit').task_id).toBe('t7');
    A.kill();
    b.locks.killHolder();
    await b.settle();
    const s2 = b.platform.socket;
    expect(s2).not.toBe(s1);
    s2.open();
    await b.settle();
    const again = s2.last('submit');
    expect(again.task_id).toBe('t7');
    s2.push({ type: 'submitted', req: reqOf(again), created: false, task: mkTask({ id: 't7', status: 'pending' }) } as ServerMessage);
    expect(B.subs.get('t7')?.state).toBe('subscribed');
    expect(B.subs.get('t7')?.submit).toBeUndefined();
  });

  it('the leader’s own socket drops: followers show it and resubscribe on the next open', async () => {
    const b = browser();
    b.tab('A');
    const B = b.tab('B');
    await b.settle();
    const s1 = b.platform.socket;
    s1.open();
    await b.settle();
    B.subs.follow('t1');
    await b.settle();
    s1.push({ type: 'snapshot', req: reqOf(s1.last('subscribe')), task: mkTask({ seq: 1, output: 'a' }) });
    await b.settle();
    s1.serverClose(1012);
    await b.settle();
    expect(B.shared.state.kind).not.toBe('open');
    expect(B.subs.get('t1')?.state).toBe('unsubscribed');
    const s2 = b.platform.socket;
    expect(s2).not.toBe(s1);
    s2.open();
    await b.settle();
    expect(s2.last('subscribe').task_id).toBe('t1');
    expect(B.shared.state.kind).toBe('open');
  });

  it('a follower streaming asks the leader for faster pings', async () => {
    const b = browser();
    const A = b.tab('A');
    const B = b.tab('B');
    await b.settle();
    b.platform.socket.open();
    await b.settle();
    A.shared.setLiveness(25_000, 10_000);
    B.shared.setLiveness(5_000, 3_000);
    await b.settle();
    b.platform.advance(5_000);
    expect(b.platform.socket.ofType('ping')).toHaveLength(1);
  });
});



describe('TetherClient over a shared socket', () => {
  it('two clients of one browser: one socket; the follower’s submit goes through the leader and its answer streams there', async () => {
    const b = browser();
    const storage = new MemoryStorage();
    const mk = (tab: string) =>
      new TetherClient({ platform: b.platform, storage, channel: null, uuid: seqUUID(), url: 'ws://x/v1/ws', pingIntervalMs: 0, sharing: { bus: b.hub.bus(), elector: b.locks.elector() }, tabId: tab });
    const one = mk('one');
    void one.start('c1');
    await b.settle();
    const two = mk('two');
    void two.start('c1');
    await b.settle();
    expect(b.platform.sockets).toHaveLength(1);
    const s = b.platform.socket;
    s.open();
    await b.settle();
    expect(two.state.kind).toBe('open');
    // Both tabs asked for the conversation's history over the one socket.
    expect(s.ofType('history')).toHaveLength(2);
    const id = two.submit('hello', 'c1');
    await b.settle();
    const sub = s.last('submit');
    expect(sub.task_id).toBe(id);
    s.push({ type: 'submitted', req: reqOf(sub), created: true, task: mkTask({ id, conversation_id: 'c1', status: 'running', input: 'hello' }) } as ServerMessage);
    s.push({ type: 'delta', task_id: id, seq: 1, attempt: 1, text: 'hi there' });
    await b.settle();
    expect(two.taskState(id)?.task?.output).toBe('hi there');
    expect(one.taskState(id)).toBeUndefined();
  });

  it('without sharing each client keeps a socket of its own', () => {
    const platform = new FakePlatform();
    const c = new TetherClient({ platform, storage: null, channel: null, url: 'ws://x/v1/ws', pingIntervalMs: 0 });
    expect(c.websocket).toBeInstanceOf(Connection);
    const d = new TetherClient({ platform, storage: null, channel: null, url: 'ws://x/v1/ws', pingIntervalMs: 0, sharing: null });
    expect(d.websocket).toBeInstanceOf(Connection);
  });
});

describe('a leader that stops', () => {
  it('tells the followers at once, and the next tab leads', async () => {
    const b = browser();
    const A = b.tab('A');
    const B = b.tab('B');
    await b.settle();
    b.platform.socket.open();
    await b.settle();
    let failed = false;
    B.shared.send({ type: 'conversations' }, { onReply: () => {}, onFail: () => (failed = true) });
    A.shared.stop();
    expect(b.platform.sockets[0]!.closedWith).toBe(1000);
    await b.settle();
    expect(failed).toBe(true);
    expect(B.shared.isLeader).toBe(true);
    expect(b.platform.sockets).toHaveLength(2);
    expect(B.shared.state.kind).toBe('connecting');
  });
});

describe('the browser’s bus and lock', () => {
  it('none without Web Locks: each tab keeps a socket of its own', () => {
    vi.stubGlobal('navigator', {});
    try {
      expect(browserSharing()).toBeNull();
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('a lock request the browser refuses makes the tab lead alone rather than wait for ever', async () => {
    vi.stubGlobal('navigator', { locks: { request: () => Promise.reject(new Error('SecurityError')) } });
    try {
      const s = browserSharing();
      expect(s).not.toBeNull();
      let led = false;
      s!.elector.elect(() => (led = true));
      await new Promise((r) => setTimeout(r, 0));
      expect(led).toBe(true);
      s!.bus.close();
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('the first tab to ask leads; the next leads once it gives the lock up', async () => {
    // A minimal Web Locks: one holder at a time, waiters in order.
    const queue: Array<() => void> = [];
    let held = false;
    const locks = {
      request: (_name: string, opts: { signal?: AbortSignal }, cb: () => Promise<void>) =>
        new Promise<void>((resolve, reject) => {
          const run = () => {
            held = true;
            void cb().then(() => {
              held = false;
              resolve();
              queue.shift()?.();
            });
          };
          opts.signal?.addEventListener('abort', () => reject(new Error('AbortError')));
          if (held) queue.push(run);
          else run();
        }),
    };
    vi.stubGlobal('navigator', { locks });
    try {
      const s = browserSharing()!;
      const led: string[] = [];
      const giveA = s.elector.elect(() => led.push('A'));
      s.elector.elect(() => led.push('B'));
      await new Promise((r) => setTimeout(r, 0));
      expect(led).toEqual(['A']);
      giveA();
      await new Promise((r) => setTimeout(r, 0));
      expect(led).toEqual(['A', 'B']);
      s.bus.close();
    } finally {
      vi.unstubAllGlobals();
    }
  });
});
