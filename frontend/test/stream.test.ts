import { describe, expect, it } from 'vitest';
import { applySnapshot, applyStreamEvent } from '../src/lib/stream';
import { mkTask } from './fakes';

describe('applyStreamEvent', () => {
  it('applies deltas, progress and status in seq order', () => {
    let t = mkTask({ seq: 3, output: 'ab', progress: 10 });
    let r = applyStreamEvent(t, { type: 'delta', task_id: 't1', seq: 4, text: 'c' });
    expect(r.outcome).toBe('applied');
    t = r.task;
    r = applyStreamEvent(t, { type: 'progress', task_id: 't1', seq: 5, progress: 40 });
    t = r.task;
    r = applyStreamEvent(t, { type: 'status', task_id: 't1', seq: 6, status: 'done', attempt: 1, error: null, result_ref: null });
    expect(r.task).toMatchObject({ seq: 6, output: 'abc', progress: 40, status: 'done' });
  });

  it('ignores repeats: seq at or below the last', () => {
    const t = mkTask({ seq: 5, output: 'x' });
    for (const seq of [1, 4, 5]) {
      const r = applyStreamEvent(t, { type: 'delta', task_id: 't1', seq, text: 'dup' });
      expect(r.outcome).toBe('repeat');
      expect(r.task).toBe(t);
    }
  });

  it('reports a gap and leaves the snapshot unchanged', () => {
    const t = mkTask({ seq: 5, output: 'x' });
    const r = applyStreamEvent(t, { type: 'delta', task_id: 't1', seq: 7, text: 'y' });
    expect(r.outcome).toBe('gap');
    expect(r.task).toBe(t);
  });

  it('clears the output when a status of a newer attempt arrives', () => {
    const t = mkTask({ seq: 9, output: 't1 t2 ', progress: 66, status: 'failed', error: 'demo failure' });
    const r = applyStreamEvent(t, { type: 'status', task_id: 't1', seq: 10, status: 'pending', attempt: 2, error: null, result_ref: null });
    expect(r.task).toMatchObject({ output: '', progress: 0, attempt: 2, status: 'pending', error: null });
  });

  it('keeps the output for a status of the same attempt', () => {
    const t = mkTask({ seq: 2, output: 'keep' });
    const r = applyStreamEvent(t, { type: 'status', task_id: 't1', seq: 3, status: 'cancelled', attempt: 1, error: null, result_ref: null });
    expect(r.task.output).toBe('keep');
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

  it('takes a snapshot of a newer attempt, and never an older attempt', () => {
    const a1 = mkTask({ seq: 10, attempt: 1 });
    const a2 = mkTask({ seq: 11, attempt: 2 });
    expect(applySnapshot(a1, a2)).toBe(a2);
    expect(applySnapshot(a2, a1)).toBe(a2);
  });
});
