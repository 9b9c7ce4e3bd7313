import { describe, expect, it } from 'vitest';
import { draftSize, draftSizeAnnouncement, draftSizeLevel } from '../src/lib/draftsize';

const limit = 32768;

describe('draft size', () => {
  it('shows from 80% of the limit and is over past it, in bytes', () => {
    expect(draftSizeLevel(0, limit)).toBe('quiet');
    expect(draftSizeLevel(26213, limit)).toBe('quiet');
    expect(draftSizeLevel(26214, limit)).toBe('near');
    expect(draftSizeLevel(limit, limit)).toBe('near');
    expect(draftSizeLevel(limit + 1, limit)).toBe('over');
  });

  it('counts ASCII as a byte a character', () => {
    expect(draftSize('x'.repeat(26213), limit).level).toBe('quiet');
    expect(draftSize('x'.repeat(32768), limit)).toEqual({ level: 'near', bytes: 32768, limit, label: '32,768 / 32,768 bytes' });
    expect(draftSize('x'.repeat(32769), limit).level).toBe('over');
  });

  it('counts a CJK character as three bytes: about 11,000 reach the limit', () => {
    expect(draftSize('漢'.repeat(8737), limit).level).toBe('quiet'); // 26,211 bytes
    expect(draftSize('漢'.repeat(8738), limit)).toMatchObject({ level: 'near', bytes: 26214 });
    expect(draftSize('漢'.repeat(10922), limit)).toMatchObject({ level: 'near', bytes: 32766 });
    expect(draftSize('漢'.repeat(10923), limit)).toMatchObject({ level: 'over', bytes: 32769, label: '32,769 / 32,768 bytes' });
    expect(draftSize('🎉'.repeat(8193), limit).level).toBe('over'); // 4 bytes each
  });

  it('has no label while quiet', () => {
    expect(draftSize('hello', limit).label).toBe('');
  });

  it('speaks only when the level changes', () => {
    const near = draftSize('x'.repeat(30000), limit);
    const over = draftSize('x'.repeat(33000), limit);
    const quiet = draftSize('x', limit);
    expect(draftSizeAnnouncement('quiet', near)).toBe('Near the message limit: 30,000 / 32,768 bytes.');
    expect(draftSizeAnnouncement('near', near)).toBeNull();
    expect(draftSizeAnnouncement('near', over)).toBe('Too long to send as a message: 232 bytes over the limit. It can be attached as a file.');
    expect(draftSizeAnnouncement('over', over)).toBeNull();
    expect(draftSizeAnnouncement('over', near)).toBe('The message fits again.');
    expect(draftSizeAnnouncement('over', quiet)).toBe('The message fits again.');
    expect(draftSizeAnnouncement('near', quiet)).toBeNull();
  });
});
