import { describe, expect, it } from 'vitest';
import { parseFrame } from '../src/lib/frame';

describe('parseFrame', () => {
  it('splits coalesced objects on newlines, in order', () => {
    const f = parseFrame('{"type":"delta","task_id":"t","seq":1,"text":"a"}\n{"type":"delta","task_id":"t","seq":2,"text":"b\\nc"}\n{"type":"progress","task_id":"t","seq":3,"progress":5}');
    expect(f.bad).toEqual([]);
    expect(f.messages.map((m) => ('seq' in m ? m.seq : 0))).toEqual([1, 2, 3]);
    expect(f.messages[1]).toMatchObject({ text: 'b\nc' });
  });

  it('takes a single object and ignores blank lines and a trailing newline', () => {
    expect(parseFrame('{"type":"pong","req":"r1"}').messages).toHaveLength(1);
    expect(parseFrame('\n{"type":"pong"}\n\n{"type":"pong"}\n').messages).toHaveLength(2);
  });

  it('reports bad lines without losing the good ones around them', () => {
    const f = parseFrame('{"type":"pong"}\nnot json\n[1,2]\n{"no":"type"}\n{"type":"pong","req":"x"}');
    expect(f.messages).toHaveLength(2);
    expect(f.bad).toEqual(['not json', '[1,2]', '{"no":"type"}']);
  });
});
