import { describe, expect, it } from 'vitest';
import { SseParser } from '../src/lib/sse';

describe('SseParser', () => {
  it('parses events split anywhere between chunks', () => {
    const text = 'event: snapshot\nid: 4\ndata: {"a":1}\n\n: keep-alive\n\nevent: delta\r\nid: 5\r\ndata: {"b":\r\ndata: 2}\r\n\r\n';
    for (let cut = 0; cut <= text.length; cut++) {
      const p = new SseParser();
      const got = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
      expect(got, `cut at ${cut}`).toEqual([
        { id: '4', event: 'snapshot', data: '{"a":1}' },
        { id: '5', event: 'delta', data: '{"b":\n2}' },
      ]);
    }
  });
  it('keeps the last id for events without one, and names events without a type "message"', () => {
    const p = new SseParser();
    expect(p.push('id: 9\ndata: x\n\ndata: y\n\n')).toEqual([
      { id: '9', event: 'message', data: 'x' },
      { id: '9', event: 'message', data: 'y' },
    ]);
  });
});
