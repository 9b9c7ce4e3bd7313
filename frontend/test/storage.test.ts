import { describe, expect, it } from 'vitest';
import { Pointers, StorageKeys } from '../src/lib/storage';
import { MemoryStorage } from './fakes';

describe('Pointers', () => {
  it('records a submit as conversation, active task and pending submit', () => {
    const kv = new MemoryStorage();
    const p = new Pointers(kv);
    p.recordSubmit({ task_id: 't1', conversation_id: 'c1', content: 'hi' });
    expect(kv.getItem(StorageKeys.conversation)).toBe('c1');
    expect(JSON.parse(kv.getItem(StorageKeys.active)!)).toEqual({ task_id: 't1', conversation_id: 'c1' });
    expect(p.pendingFor('t1')).toEqual({ task_id: 't1', conversation_id: 'c1', content: 'hi' });
    // a second page load sees the same
    const q = new Pointers(kv);
    expect(q.active()).toEqual({ task_id: 't1', conversation_id: 'c1' });
    expect(q.pending()).toHaveLength(1);
  });

  it('keeps one pending record per id and removes it', () => {
    const p = new Pointers(new MemoryStorage());
    p.recordSubmit({ task_id: 't1', conversation_id: 'c1', content: 'a' });
    p.recordSubmit({ task_id: 't1', conversation_id: 'c1', content: 'a' });
    p.recordSubmit({ task_id: 't2', conversation_id: 'c1', content: 'b' });
    expect(p.pending().map((x) => x.task_id)).toEqual(['t1', 't2']);
    p.removePending('t1');
    expect(p.pending().map((x) => x.task_id)).toEqual(['t2']);
  });

  it('clears the active pointer only if it still names the task', () => {
    const p = new Pointers(new MemoryStorage());
    p.setActive({ task_id: 't2', conversation_id: 'c' });
    p.clearActive('t1');
    expect(p.active()?.task_id).toBe('t2');
    p.clearActive('t2');
    expect(p.active()).toBeNull();
  });

  it('survives storage that throws or holds garbage', () => {
    const broken = {
      getItem: () => {
        throw new Error('denied');
      },
      setItem: () => {
        throw new Error('quota');
      },
      removeItem: () => {},
    };
    const p = new Pointers(broken);
    p.recordSubmit({ task_id: 't1', conversation_id: 'c1', content: 'x' });
    expect(p.active()?.task_id).toBe('t1');
    const kv = new MemoryStorage();
    kv.setItem(StorageKeys.active, '{not json');
    kv.setItem(StorageKeys.pending, '{"a":1}');
    const q = new Pointers(kv);
    expect(q.active()).toBeNull();
    expect(q.pending()).toEqual([]);
  });
});
