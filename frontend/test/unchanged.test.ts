import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../src/lib/history';
import { localPair } from '../src/lib/history';
import { newTaskState } from '../src/lib/tasks';
import { buildMessages, keepUnchanged, showPath, type TaskState, type ViewMessage } from '../src/lib/view';
import { mkTask } from './fakes';

function turn(n: number, content = `answer ${n}`, status: ChatMessage['status'] = 'done'): ChatMessage[] {
  const at = '2025-01-01T00:00:00Z';
  return [
    { id: `u${n}`, conversation_id: 'c1', role: 'user', content: `question ${n}`, task_id: `t${n}`, status: null, created_at: at, attachments: [{ id: 'f1', name: 'a.txt', size: 3, type: 'text/plain' }] },
    { id: `a${n}`, conversation_id: 'c1', role: 'assistant', content, task_id: `t${n}`, status, created_at: at },
  ];
}

function view(messages: ChatMessage[], tasks: Map<string, TaskState>): ViewMessage[] {
  return showPath(buildMessages(messages, tasks), new Map());
}

describe('keepUnchanged', () => {
  it('hands on every message that did not change as the same object, and only those', () => {
    const history = [...turn(1), ...turn(2), ...turn(3, '', 'generating')];
    const tasks = new Map<string, TaskState>([['t3', { ...newTaskState('t3', 'c1'), task: mkTask({ id: 't3', output: 'a b', progress: 10 }) }]]);
    const prev = new Map<string, ViewMessage>();
    const first = keepUnchanged(prev, view(history, tasks));
    // A delta: only the streaming answer's text and progress change.
    tasks.get('t3')!.task = mkTask({ id: 't3', output: 'a b c', progress: 20 });
    const second = keepUnchanged(prev, view(history, tasks));
    expect(second.slice(0, 5).every((m, i) => m === first[i])).toBe(true);
    expect(second[5]).not.toBe(first[5]);
    expect(second[5]).toMatchObject({ content: 'a b c', progress: 20 });
    // Built again from the same state (new arrays of attachments, new objects): still the same objects.
    const third = keepUnchanged(prev, view(history, tasks));
    expect(third.every((m, i) => m === second[i])).toBe(true);
  });

  it('gives a new object when the answer ends, and to messages whose offers change with it', () => {
    // A turn with files is offered again like any other.
    const history = [...turn(1), ...turn(2, '', 'generating')];
    const tasks = new Map<string, TaskState>([['t2', { ...newTaskState('t2', 'c1'), task: mkTask({ id: 't2', output: 'x' }) }]]);
    const prev = new Map<string, ViewMessage>();
    const streaming = keepUnchanged(prev, view(history, tasks));
    tasks.get('t2')!.task = mkTask({ id: 't2', status: 'done', output: 'x y' });
    const done = keepUnchanged(prev, view(history, tasks));
    // Nothing runs any more: the first answer can be regenerated again, so it changed too.
    expect(done[1]).not.toBe(streaming[1]);
    expect(done[1]!.canRegenerate).toBe(true);
    expect(done[3]).toMatchObject({ status: 'done', content: 'x y' });
  });

  it('replaces a local echo by the server row of the same task', () => {
    const at = '2025-01-01T00:00:00Z';
    const prev = new Map<string, ViewMessage>();
    const tasks = new Map<string, TaskState>([['t9', { ...newTaskState('t9', 'c1'), content: 'hi', sending: true }]]);
    const echo = keepUnchanged(prev, view(localPair('t9', 'c1', 'hi', at), tasks));
    const rows: ChatMessage[] = [
      { id: 'u9', conversation_id: 'c1', role: 'user', content: 'hi', task_id: 't9', status: null, created_at: at },
      { id: 'a9', conversation_id: 'c1', role: 'assistant', content: '', task_id: 't9', status: 'generating', created_at: at },
    ];
    const server = keepUnchanged(prev, view(rows, tasks));
    expect(server[0]).not.toBe(echo[0]);
    expect(server[0]!.id).toBe('u9');
  });
});
