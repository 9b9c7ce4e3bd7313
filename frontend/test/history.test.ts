import { describe, expect, it } from 'vitest';
import { addLocal, localPair, mergeNewest, mergeOlder, type ChatMessage } from '../src/lib/history';
import type { Message } from '../src/lib/protocol';

function msg(i: number, task = `t${Math.ceil(i / 2)}`): Message {
  return { id: `m${i}`, conversation_id: 'c', role: i % 2 ? 'user' : 'assistant', content: `c${i}`, task_id: task, status: i % 2 ? null : 'done', created_at: 'x' };
}
const ids = (ms: ChatMessage[]) => ms.map((m) => m.id);

describe('history merge', () => {
  it('takes the first page as it is', () => {
    const r = mergeNewest([], [msg(3), msg(4)]);
    expect(ids(r.messages)).toEqual(['m3', 'm4']);
    expect(r.reset).toBe(false);
  });

  it('puts older pages in front without duplicates, in order', () => {
    let list = mergeNewest([], [msg(5), msg(6)]).messages;
    list = mergeOlder(list, [msg(3), msg(4), msg(5)]);
    list = mergeOlder(list, [msg(1), msg(2), msg(3)]);
    expect(ids(list)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
  });

  it('refreshes the newest page over what is loaded, keeping older pages', () => {
    const list = mergeOlder(mergeNewest([], [msg(3), msg(4)]).messages, [msg(1), msg(2)]);
    const updated = { ...msg(4), content: 'final' };
    const r = mergeNewest(list, [msg(3), updated, msg(5), msg(6)]);
    expect(ids(r.messages)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
    expect(r.messages[3]!.content).toBe('final');
    expect(r.reset).toBe(false);
  });

  it('restarts from the page when it does not overlap what is loaded', () => {
    const r = mergeNewest([msg(1), msg(2)], [msg(7), msg(8)]);
    expect(ids(r.messages)).toEqual(['m7', 'm8']);
    expect(r.reset).toBe(true);
  });

  it('replaces local echoes with the server messages of the same task', () => {
    let list = addLocal(mergeNewest([], [msg(1), msg(2)]).messages, localPair('t9', 'c', 'hi', 'now'));
    expect(ids(list)).toEqual(['m1', 'm2', 'local-user-t9', 'local-assistant-t9']);
    // adding the same echo twice does not double it
    list = addLocal(list, localPair('t9', 'c', 'hi', 'now'));
    expect(list).toHaveLength(4);
    const server = [msg(1), msg(2), { ...msg(17, 't9'), content: 'hi' }, { ...msg(18, 't9'), status: 'generating' as const, content: '' }];
    const r = mergeNewest(list, server);
    expect(ids(r.messages)).toEqual(['m1', 'm2', 'm17', 'm18']);
  });

  it('keeps a local echo the server does not have yet', () => {
    const list = addLocal([], localPair('t9', 'c', 'hi', 'now'));
    const r = mergeNewest(list, [msg(1), msg(2)]);
    expect(ids(r.messages)).toEqual(['m1', 'm2', 'local-user-t9', 'local-assistant-t9']);
  });

  it('drops duplicates inside a page', () => {
    expect(ids(mergeNewest([], [msg(1), msg(1), msg(2)]).messages)).toEqual(['m1', 'm2']);
  });
});
