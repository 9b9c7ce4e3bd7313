import { describe, expect, it } from 'vitest';
import { clearsPointer, decideRestore, type PendingSubmit } from '../src/lib/restore';
import { mkTask } from './fakes';

const pending: PendingSubmit = { task_id: 't1', conversation_id: 'c1', content: 'hello' };

describe('decideRestore', () => {
  it('re-attaches a running or pending task and keeps the pointer', () => {
    for (const status of ['running', 'pending'] as const) {
      const task = mkTask({ status, progress: 42 });
      const a = decideRestore(undefined, { kind: 'task', task });
      expect(a).toEqual({ kind: 'attach', task });
      expect(clearsPointer(a)).toBe(false);
      // A stored pending submit for a found task is never re-sent.
      expect(decideRestore(pending, { kind: 'task', task }).kind).toBe('attach');
    }
  });

  it('shows a done task, then clears the pointer', () => {
    const a = decideRestore(undefined, { kind: 'task', task: mkTask({ status: 'done' }) });
    expect(a.kind).toBe('show_done');
    expect(clearsPointer(a)).toBe(true);
  });

  it('shows a cancelled task and clears the pointer', () => {
    const a = decideRestore(undefined, { kind: 'task', task: mkTask({ status: 'cancelled' }) });
    expect(a.kind).toBe('show_cancelled');
    expect(clearsPointer(a)).toBe(true);
  });

  it('shows a failed task with its error and keeps the pointer for the retry', () => {
    const task = mkTask({ status: 'failed', error: 'demo failure' });
    const a = decideRestore(pending, { kind: 'task', task });
    expect(a).toEqual({ kind: 'show_failed', task });
    expect(clearsPointer(a)).toBe(false);
  });

  it('re-sends a stored pending submit with the same id when the server does not know it', () => {
    const a = decideRestore(pending, { kind: 'not_found' });
    expect(a).toEqual({ kind: 'resend', submit: pending });
    expect(clearsPointer(a)).toBe(false);
  });

  it('clears a pointer the server does not know and nothing can re-send', () => {
    const a = decideRestore(undefined, { kind: 'not_found' });
    expect(a).toEqual({ kind: 'clear' });
    expect(clearsPointer(a)).toBe(true);
  });
});
