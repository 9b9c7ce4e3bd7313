import { describe, expect, it } from 'vitest';
import { Connection } from '../src/lib/connection';
import { Subscriptions } from '../src/lib/subscription';
import type { Task, TaskStatus } from '../src/lib/protocol';
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

const delta = (seq: number, text: string, attempt = 1) => ({ type: 'delta' as const, task_id: 't1', seq, attempt, text });
const status = (seq: number, s: TaskStatus, attempt: number, keep?: number) => ({ type: 'status' as const, task_id: 't1', seq, status: s, attempt, error: null, result_ref: null, ...(keep === undefined ? {} : { keep }) });

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

  it('clears the output on a status of a newer attempt without keep', () => {
    const { p, subs } = setup();
    const attempts: unknown[] = [];
    subs.events.on('attempt', (a) => attempts.push(a));
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 2, output: 'ab', status: 'running' }) });
    p.socket.push(status(3, 'pending', 2), delta(4, 'n', 2));
    expect(subs.get('t1')!.task).toMatchObject({ attempt: 2, output: 'n' });
    expect(attempts).toEqual([{ id: 't1', attempt: 2, keep: 0 }]);
  });

  it('continues a lost runner\'s answer: truncates to keep bytes, announces the attempt, appends what follows', () => {
    const { p, subs, updates, gaps } = setup();
    const seen: string[] = [];
    subs.events.on('attempt', (a) => seen.push(`attempt ${a.attempt} keep ${a.keep}`));
    subs.events.on('update', (u) => seen.push(`update ${u.task.output}`));
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 2, output: 'héllo ', status: 'running' }) });
    p.socket.push(delta(3, 'wö', 1), delta(4, 'rld', 1));
    // 'héllo wö' is 10 bytes: the new attempt kept what the log had acknowledged.
    p.socket.push(status(4, 'pending', 2, 10), status(5, 'running', 2, 10), delta(6, 'rld 🎉', 2));
    expect(subs.get('t1')!.task).toMatchObject({ attempt: 2, seq: 6, status: 'running', output: 'héllo wörld 🎉' });
    expect(seen.slice(-4)).toEqual(['attempt 2 keep 10', 'update héllo wö', 'update héllo wö', 'update héllo wörld 🎉']);
    expect(gaps).toEqual([]);
    expect(p.socket.ofType('subscribe')).toHaveLength(1);
    expect(updates.map((u) => u.output)).not.toContain('');
  });

  it('drops stale events of an older attempt silently, without resubscribing', () => {
    const { p, subs, updates, gaps } = setup();
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 10, attempt: 2, output: 'abc', status: 'running' }) });
    const before = subs.get('t1')!.task;
    p.socket.push(delta(11, 'zombie', 1), delta(25, 'zombie', 1), status(11, 'done', 1));
    expect(subs.get('t1')!.task).toBe(before);
    expect(updates).toHaveLength(1); // the snapshot only
    expect(gaps).toEqual([]);
    expect(p.socket.ofType('subscribe')).toHaveLength(1);
    expect(subs.get('t1')!.state).toBe('subscribed');
    p.socket.push(delta(11, 'd', 2));
    expect(subs.get('t1')!.task!.output).toBe('abcd');
  });

  it('resubscribes when a newer attempt shows up without its start, or keeps more than the tab has', () => {
    const { p, subs, gaps } = setup();
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 5, output: 'abc', status: 'running' }) });
    p.socket.push(delta(6, 'x', 2));
    expect(gaps).toEqual([{ id: 't1', have: 5, got: 6 }]);
    expect(p.socket.ofType('subscribe')).toHaveLength(2);
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 5, output: 'abc', status: 'running' }) });
    p.socket.push(status(6, 'pending', 2, 4));
    expect(gaps).toHaveLength(2);
    expect(p.socket.ofType('subscribe')).toHaveLength(3);
    expect(subs.get('t1')!.task).toMatchObject({ attempt: 1, output: 'abc' }); // nothing shown is taken away meanwhile
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 7, attempt: 2, output: 'abcdX', status: 'running' }) });
    expect(subs.get('t1')!.task).toMatchObject({ attempt: 2, seq: 7, output: 'abcdX' });
  });

  it('ignores a stream event whose seq or attempt is not an integer', () => {
    const { p, subs, gaps } = setup();
    subs.follow('t1');
    p.socket.push({ type: 'snapshot', req: p.socket.last('subscribe').req, task: mkTask({ seq: 2, output: 'ab' }) });
    p.socket.raw('{"type":"delta","task_id":"t1","seq":"3","attempt":1,"text":"x"}\n{"type":"delta","task_id":"t1","seq":3,"attempt":"2","text":"y"}');
    expect(subs.get('t1')!.task!.output).toBe('ab');
    expect(gaps).toEqual([]);
    p.socket.raw('{"type":"delta","task_id":"t1","seq":3,"text":"c"}'); // a 1.0 server: no attempt
    expect(subs.get('t1')!.task!.output).toBe('abc');
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
