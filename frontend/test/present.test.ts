import { describe, expect, it } from 'vitest';
import { describeError, describeTaskError, describeTooLong } from '../src/lib/errortext';
import { nextAnnouncement, speakable } from '../src/lib/sentences';

describe('nextAnnouncement', () => {
  it('says nothing until a sentence is complete', () => {
    expect(nextAnnouncement('Hello wor', 0, false)).toEqual({ say: '', upTo: 0 });
    expect(nextAnnouncement('Hello world.', 0, false)).toEqual({ say: '', upTo: 0 });
  });
  it('says each complete sentence once', () => {
    const a = nextAnnouncement('Hello world. How are', 0, false);
    expect(a).toEqual({ say: 'Hello world.', upTo: 12 });
    const b = nextAnnouncement('Hello world. How are you? Fine', a.upTo, false);
    expect(b.say).toBe('How are you?');
    expect(nextAnnouncement('Hello world. How are you? Fine', b.upTo, false).say).toBe('');
    expect(nextAnnouncement('Hello world. How are you? Fine', b.upTo, true).say).toBe('Fine');
  });
  it('ends a sentence at a line break (a heading, a list item) and drops the markup', () => {
    const a = nextAnnouncement('## Heading\n\n- **First** item\n- Sec', 0, false);
    expect(a.say).toBe('Heading First item');
    expect(a.upTo).toBe('## Heading\n\n- **First** item\n'.length);
  });
  it('keeps numbers with a decimal point whole, and a numbered item with its text', () => {
    expect(nextAnnouncement('It costs 3.50 euros', 0, false).say).toBe('');
    expect(nextAnnouncement('1. One\n2. Tw', 0, false).say).toBe('One');
  });
});

describe('speakable', () => {
  it('reads links by their text and code without fences', () => {
    expect(speakable('See [Tether](https://example.com/tether), **bold** and `code`.')).toBe('See Tether, bold and code.');
    expect(speakable('```go\nfmt.Println("x")\n```\n')).toBe('fmt.Println("x")');
    expect(speakable('| a | b |\n| --- | --- |\n| 1 | 2 |')).toBe('a b 1 2');
  });
});

describe('human errors', () => {
  it('says what a code means and keeps the detail', () => {
    expect(describeError('rate_limited', 'too many requests; slow down')).toEqual({
      text: 'Too many requests at once. Wait a moment and try again.',
      detail: 'too many requests; slow down (rate_limited)',
    });
    expect(describeError('weird', '').text).toBe('Something went wrong. Try again.');
  });
  it('explains task errors and keeps an engine message as the detail', () => {
    expect(describeTaskError('demo failure')).toEqual({ text: 'The assistant could not finish this answer. Try again.', detail: 'demo failure' });
    expect(describeTaskError('no_runner').text).toMatch(/No worker/);
  });
  it('says how long a message is and what the limit is', () => {
    expect(describeTooLong(40000, 32768).text).toBe('This message is too long to send: 40,000 bytes, and the limit is 32,768. Shorten it or attach it as a file.');
  });
});
