import { describe, expect, it } from 'vitest';
import { Connection } from '../src/lib/connection';
import { Subscriptions } from '../src/lib/subscription';
import type { Task } from '../src/lib/protocol';
import { FakePlatform, mkTask } from './fakes';

function setup() {
  const p = new FakePlatform();
  const conn = new Connection({ url: 'ws://x', platform: p, pingIntervalMs: 0 });
  const subs = new Subscriptions(conn);
  const updates: Task[] = [];
  const gaps: Array<{ id: string; have: number; got: number }> = [];
  subs.events.on('update', (u) => updates.push(u.task));
  subs.events.on('gap', (g) => gaps.push(g));
  conn.start();
  p.socket.open();
  return { p, conn, subs, updates, gaps };
}

const delta = (seq: number, text: string) => ({ type: 'delta' as const, task_id: 't1', seq, text });

describe('Subscriptions', () => {
  it('applies the snapshot, then the events after it, including those in the same frame', () => {
    const { p, subs } = setup();
    subs.follow('t1');
    const sub = p.socket.last('subscribe');
    expect(subs.get('t1')!.state).toBe('subscribing');
    p.socket.push({ type: 'snapshot', req: sub.req, task: mkTask({ seq: 4, output: 'abcd', progress: 37 }) }, delta(5, 'e'), delta(6, 'f'));
    expect(subs.get('t1')!.state).toBe('subscribed');
    expect(subs.get('t1')!.task).toMatchObject({ seq: 6, output: 'abcdef', progress: 37 });
  });

  it('drops events that arrive before the snapshot (the snapshot covers them)', () => {
    const { p, subs } = setup();
    subs.follow('t1');
    p.socket.push(delta(3, 'x'));
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 3, output: 'abc' }) });
    expect(subs.get('t1')!.task!.output).toBe('abc');
  });

  it('ignores repeats', () => {
    const { p, subs, updates } = setup();
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 2, output: 'ab' }) });
    p.socket.push(delta(3, 'c'), delta(3, 'c'), delta(2, 'b'), delta(4, 'd'));
    expect(subs.get('t1')!.task!.output).toBe('abcd');
    expect(updates).toHaveLength(3);
  });

  it('resubscribes on a gap and continues from the fresh snapshot', () => {
    const { p, subs, gaps } = setup();
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 2, output: 'ab' }) });
    p.socket.push(delta(4, 'd'));
    expect(gaps).toEqual([{ id: 't1', have: 2, got: 4 }]);
    expect(p.socket.ofType('subscribe')).toHaveLength(2);
    expect(subs.get('t1')!.state).toBe('subscribing');
    expect(subs.get('t1')!.task!.output).toBe('ab'); // nothing shown is taken away meanwhile
    p.socket.push(delta(5, 'e')); // still before the snapshot: dropped
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 5, output: 'abcde' }) }, delta(6, 'f'));
    expect(subs.get('t1')!.task).toMatchObject({ seq: 6, output: 'abcdef' });
  });

  it('clears the output on a status of a newer attempt', () => {
    const { p, subs } = setup();
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 2, output: 'ab', status: 'running' }) });
    p.socket.push({ type: 'status', task_id: 't1', seq: 3, status: 'pending', attempt: 2, error: null, result_ref: null }, delta(4, 'n'));
    expect(subs.get('t1')!.task).toMatchObject({ attempt: 2, output: 'n' });
  });

  it('resubscribes every followed task after a reconnect', () => {
    const { p, subs } = setup();
    subs.follow('t1');
    subs.follow('t2');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ id: 't2', seq: 1 }) });
    p.socket.serverClose(1012);
    expect(subs.get('t1')!.state).toBe('unsubscribed');
    expect(subs.get('t2')!.state).toBe('unsubscribed');
    p.socket.open();
    expect(p.socket.ofType('subscribe').map((m) => m.task_id).sort()).toEqual(['t1', 't2']);
    expect(subs.get('t1')!.state).toBe('subscribing');
  });

  it('re-sends an unconfirmed submit with the same id after a reconnect, and subscribes once confirmed', () => {
    const { p, subs } = setup();
    const submit = { task_id: 't1', conversation_id: 'c1', content: 'hi' };
    subs.follow('t1', submit);
    expect(p.socket.last('submit')).toMatchObject({ task_id: 't1', conversation_id: 'c1', content: 'hi' });
    p.socket.serverClose(1006);
    p.advance(30_000);
    p.socket.open();
    const again = p.socket.last('submit');
    expect(again).toMatchObject({ task_id: 't1', conversation_id: 'c1', content: 'hi' });
    expect(p.socket.ofType('subscribe')).toHaveLength(0);
    p.socket.push({ type: 'submitted', req: again.req, created: false, task: mkTask({ seq: 1, status: 'pending' }) });
    expect(subs.get('t1')!.submit).toBeUndefined();
    p.socket.serverClose(1006);
    p.advance(30_000);
    p.socket.open();
    expect(p.socket.ofType('submit')).toHaveLength(0);
    expect(p.socket.ofType('subscribe')).toHaveLength(1);
  });

  it('drops a subscription the server does not know', () => {
    const { p, subs } = setup();
    const nf: string[] = [];
    subs.events.on('not_found', ({ id }) => nf.push(id));
    subs.follow('t1');
    p.socket.push({ type: 'error', req: p.socket.last('subscribe').req, code: 'not_found', message: 'no such task' });
    expect(nf).toEqual(['t1']);
    expect(subs.get('t1')).toBeUndefined();
  });

  it('ignores the reply of an older request once a newer one is out', () => {
    const { p, subs } = setup();
    subs.follow('t1');
    const first = p.socket.last('subscribe');
    subs.resubscribe('t1', 'test');
    const second = p.socket.last('subscribe');
    p.socket.push({ type: 'snapshot', req: first.req, task: mkTask({ seq: 1, output: 'a' }) });
    expect(subs.get('t1')!.state).toBe('subscribing');
    p.socket.push({ type: 'snapshot', req: second.req, task: mkTask({ seq: 2, output: 'ab' }) });
    expect(subs.get('t1')!.task!.output).toBe('ab');
  });

  it('unsubscribes on unfollow', () => {
    const { p, subs } = setup();
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 1 }) });
    subs.unfollow('t1');
    expect(p.socket.last('unsubscribe').task_id).toBe('t1');
    p.socket.push(delta(2, 'x'));
    expect(subs.get('t1')).toBeUndefined();
  });
});
