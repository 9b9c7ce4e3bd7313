import { describe, expect, it } from 'vitest';
import type { StatusEvent, StreamEvent, TaskStatus } from '../src/lib/protocol';
import { applySnapshot, applyStreamEvent } from '../src/lib/stream';
import { utf8ByteLength } from '../src/lib/utf8';
import { mkTask } from './fakes';

const delta = (seq: number, text: string, attempt = 1): StreamEvent => ({ type: 'delta', task_id: 't1', seq, attempt, text });
const progress = (seq: number, value: number, attempt = 1): StreamEvent => ({ type: 'progress', task_id: 't1', seq, attempt, progress: value });
function status(seq: number, s: TaskStatus, attempt: number, keep?: number): StatusEvent {
  const ev: StatusEvent = { type: 'status', task_id: 't1', seq, status: s, attempt, error: null, result_ref: null };
  if (keep !== undefined) ev.keep = keep;
  return ev;
}

/** Folds events in order and returns the final task and every outcome. */
function fold(t: ReturnType<typeof mkTask>, evs: StreamEvent[]) {
  const outcomes: string[] = [];
  for (const ev of evs) {
    const r = applyStreamEvent(t, ev);
    outcomes.push(r.outcome);
    t = r.task;
  }
  return { task: t, outcomes };
}

// The ordering itself (stale, repeat, next, start, gap, and what keep keeps)
// is held to the server's cases in ordering.test.ts; these are what only the
// browser does: progress that never moves back, 1.0 events, and what a start
// reports.
describe('applyStreamEvent: the attempt the tab holds', () => {
  it('applies deltas, progress and status in seq order', () => {
    let t = mkTask({ seq: 3, output: 'ab', progress: 10 });
    let r = applyStreamEvent(t, delta(4, 'c'));
    expect(r.outcome).toBe('applied');
    expect(r.started).toBeUndefined();
    t = r.task;
    r = applyStreamEvent(t, progress(5, 40));
    t = r.task;
    r = applyStreamEvent(t, status(6, 'done', 1));
    expect(r.task).toMatchObject({ seq: 6, output: 'abc', progress: 40, status: 'done', attempt: 1 });
  });

  it('never lowers the progress shown', () => {
    const r = applyStreamEvent(mkTask({ seq: 4, progress: 60 }), progress(5, 20));
    expect(r.outcome).toBe('applied');
    expect(r.task).toMatchObject({ seq: 5, progress: 60 });
  });

  it('takes an event without attempt (a 1.0 server) as one of the attempt held', () => {
    const t = mkTask({ seq: 3, attempt: 2, output: 'ab' });
    const old = { type: 'delta', task_id: 't1', seq: 4, text: 'c' } as unknown as StreamEvent;
    const r = applyStreamEvent(t, old);
    expect(r.outcome).toBe('applied');
    expect(r.task).toMatchObject({ seq: 4, attempt: 2, output: 'abc' });
    expect(applyStreamEvent(t, { ...old, seq: 3 } as StreamEvent).outcome).toBe('repeat');
    expect(applyStreamEvent(t, { ...old, seq: 9 } as StreamEvent).outcome).toBe('gap');
  });
});

describe('applyStreamEvent: a newer attempt', () => {
  // Byte offsets: h0 é1-2 l3 l4 o5 ␠6 w7 ö8-9 r10 l11 d12 ␠13 🎉14-17: 18 bytes, 14 UTF-16 units.
  const text = 'héllo wörld 🎉';
  it('measures the example text in bytes', () => {
    expect(utf8ByteLength(text)).toBe(18);
    expect(text.length).toBe(14);
  });

  it.each([
    [0, ''],
    [1, 'h'],
    [3, 'hé'],
    [7, 'héllo '],
    [8, 'héllo w'],
    [10, 'héllo wö'],
    [11, 'héllo wör'],
    [14, 'héllo wörld '],
    [18, text],
  ])('starts with keep %i: the output is truncated to %j', (keep, want) => {
    const t = mkTask({ seq: 30, attempt: 1, status: 'running', output: text, progress: 70 });
    const r = applyStreamEvent(t, status(31, 'pending', 2, keep));
    expect(r.outcome).toBe('applied');
    expect(r.started).toEqual({ attempt: 2, keep });
    expect(r.task).toMatchObject({ output: want, seq: 31, attempt: 2, status: 'pending', error: null, result_ref: null });
    expect(utf8ByteLength(r.task.output)).toBe(keep);
    // Progress: carried over when text is kept (it describes that text), 0 when it starts over.
    expect(r.task.progress).toBe(keep === 0 ? 0 : 70);
  });

  it('treats a keep that is not a non-negative integer as a gap', () => {
    const t = mkTask({ seq: 30, output: text });
    for (const keep of [-1, 1.5, Number.NaN]) expect(applyStreamEvent(t, status(31, 'pending', 2, keep)).outcome).toBe('gap');
  });

  it('clears the output when keep is absent (a retry, or an engine that starts over)', () => {
    const t = mkTask({ seq: 9, output: 't1 t2 ', progress: 66, status: 'failed', error: 'demo failure' });
    const r = applyStreamEvent(t, status(10, 'pending', 2));
    expect(r.outcome).toBe('applied');
    expect(r.started).toEqual({ attempt: 2, keep: 0 });
    expect(r.task).toMatchObject({ output: '', progress: 0, attempt: 2, status: 'pending', error: null, seq: 10 });
  });

  it('starts with a running status too, and then appends the deltas that follow', () => {
    const t = mkTask({ seq: 12, output: 't1 t2 t3 t4 ', progress: 40 });
    const { task, outcomes } = fold(t, [status(13, 'running', 2, 9), delta(14, 't4 ', 2), delta(15, 't5 ', 2), progress(16, 50, 2)]);
    expect(outcomes).toEqual(['applied', 'applied', 'applied', 'applied']);
    expect(task).toMatchObject({ output: 't1 t2 t3 t4 t5 ', seq: 16, attempt: 2, status: 'running', progress: 50 });
  });
});

describe('applySnapshot', () => {
  it('takes the first snapshot and any newer one', () => {
    const a = mkTask({ seq: 3 });
    expect(applySnapshot(undefined, a)).toBe(a);
    const b = mkTask({ seq: 8 });
    expect(applySnapshot(a, b)).toBe(b);
  });

  it('keeps a newer view over a lagging snapshot of the same attempt', () => {
    const mine = mkTask({ seq: 8, output: 'longer', progress: 50 });
    const lag = mkTask({ seq: 5, output: 'lo', progress: 30 });
    expect(applySnapshot(mine, lag)).toBe(mine);
  });

  it('takes a snapshot of a newer attempt, and never an older attempt, whatever their seqs', () => {
    const a1 = mkTask({ seq: 10, attempt: 1 });
    const a2 = mkTask({ seq: 11, attempt: 2 });
    expect(applySnapshot(a1, a2)).toBe(a2);
    expect(applySnapshot(a2, a1)).toBe(a2);
    const a2low = mkTask({ seq: 8, attempt: 2, output: 'kept' });
    expect(applySnapshot(mkTask({ seq: 12, attempt: 1 }), a2low)).toBe(a2low);
    expect(applySnapshot(a2low, mkTask({ seq: 12, attempt: 1 }))).toBe(a2low);
  });

  it('keeps the progress shown when a later snapshot of the same attempt counts less', () => {
    const mine = mkTask({ seq: 8, attempt: 2, output: 'abc', progress: 45 });
    const snap = mkTask({ seq: 9, attempt: 2, output: 'abcd', progress: 10 });
    expect(applySnapshot(mine, snap)).toEqual({ ...snap, progress: 45 });
  });
});
