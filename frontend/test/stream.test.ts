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

  it('ignores repeats: seq at or below the last', () => {
    const t = mkTask({ seq: 5, output: 'x' });
    for (const seq of [1, 4, 5]) {
      const r = applyStreamEvent(t, delta(seq, 'dup'));
      expect(r.outcome).toBe('repeat');
      expect(r.task).toBe(t);
    }
  });

  it('reports a gap and leaves the snapshot unchanged', () => {
    const t = mkTask({ seq: 5, output: 'x' });
    const r = applyStreamEvent(t, delta(7, 'y'));
    expect(r.outcome).toBe('gap');
    expect(r.task).toBe(t);
  });

  it('keeps the output for a status of the same attempt, and ignores its keep', () => {
    const t = mkTask({ seq: 2, output: 'keep this' });
    expect(applyStreamEvent(t, status(3, 'cancelled', 1)).task.output).toBe('keep this');
    // The attempt's running status repeats the keep its pending status carried; deltas came between.
    const r = applyStreamEvent(mkTask({ seq: 2, attempt: 2, status: 'pending', output: 'héllo' }), status(3, 'running', 2, 2));
    expect(r.outcome).toBe('applied');
    expect(r.started).toBeUndefined();
    expect(r.task).toMatchObject({ output: 'héllo', status: 'running', attempt: 2, seq: 3 });
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

describe('applyStreamEvent: an older attempt is stale', () => {
  it('drops every event of an older attempt, whatever its seq, changing nothing', () => {
    const t = mkTask({ seq: 20, attempt: 2, output: 't1 t2 t3 ', progress: 30 });
    for (const ev of [delta(21, 'zombie ', 1), delta(5, 'zombie ', 1), delta(20, 'x', 1), progress(21, 99, 1), status(21, 'done', 1), status(21, 'running', 1, 3)]) {
      const r = applyStreamEvent(t, ev);
      expect(r.outcome).toBe('stale');
      expect(r.task).toBe(t);
    }
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

  it.each([2, 9, 15, 16, 17])('treats keep %i, inside a character, as a gap', (keep) => {
    const t = mkTask({ seq: 30, output: text });
    const r = applyStreamEvent(t, status(31, 'running', 2, keep));
    expect(r.outcome).toBe('gap');
    expect(r.task).toBe(t);
  });

  it('treats a keep longer than the output held as a gap (the tab missed text the attempt kept)', () => {
    const t = mkTask({ seq: 30, output: text });
    expect(applyStreamEvent(t, status(31, 'pending', 2, 19)).outcome).toBe('gap');
    expect(applyStreamEvent(mkTask({ seq: 3, output: '' }), status(4, 'pending', 2, 1)).outcome).toBe('gap');
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

  it('starts with a seq lower than the one held, after stale events of the old attempt got ahead', () => {
    // The old runner was paused: its late events 11-13 reached the tab, but only up to seq 10
    // was durable, so the new attempt kept that text and numbers on from 11.
    let t = mkTask({ seq: 10, output: 'a b c ', progress: 30 });
    let f = fold(t, [delta(11, 'd ', 1), delta(12, 'e ', 1), delta(13, 'f ', 1)]);
    expect(f.task.output).toBe('a b c d e f ');
    t = f.task;
    f = fold(t, [status(11, 'pending', 2, 6), status(12, 'running', 2, 6), delta(13, 'D ', 2), delta(12, 'late ', 1), delta(14, 'E ', 2), status(14, 'done', 1)]);
    expect(f.outcomes).toEqual(['applied', 'applied', 'applied', 'stale', 'applied', 'stale']);
    expect(f.task).toMatchObject({ output: 'a b c D E ', seq: 14, attempt: 2, status: 'running' });
  });

  it('treats a start whose seq skips ahead as a gap', () => {
    const t = mkTask({ seq: 10, output: 'abc' });
    const r = applyStreamEvent(t, status(12, 'pending', 2, 3));
    expect(r.outcome).toBe('gap');
    expect(r.task).toBe(t);
  });

  it('treats any other event of a newer attempt as a gap (the tab missed its start)', () => {
    const t = mkTask({ seq: 10, output: 'abc', progress: 20 });
    for (const ev of [delta(11, 'x', 2), progress(11, 50, 2), status(11, 'done', 2), status(11, 'failed', 2), status(11, 'cancelled', 2, 3), delta(5, 'x', 2)]) {
      const r = applyStreamEvent(t, ev);
      expect(r.outcome).toBe('gap');
      expect(r.task).toBe(t);
    }
  });

  it('starts an attempt more than one ahead the same way', () => {
    const r = applyStreamEvent(mkTask({ seq: 10, output: 'abcdef' }), status(11, 'pending', 3, 4));
    expect(r.outcome).toBe('applied');
    expect(r.task).toMatchObject({ attempt: 3, output: 'abcd' });
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
