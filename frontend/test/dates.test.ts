import { describe, expect, it } from 'vitest';
import { dateGroup, groupByDate, messageTime } from '../src/lib/dates';

// Local times, so the test holds in any time zone.
const at = (y: number, m: number, d: number, h = 12, min = 0) => new Date(y, m - 1, d, h, min).toISOString();
const now = new Date(2026, 11, 1, 9, 30).getTime();

describe('dateGroup', () => {
  it('names the groups people know', () => {
    expect(dateGroup(at(2026, 12, 1, 0, 5), now)).toBe('Today');
    expect(dateGroup(at(2026, 11, 30, 23, 59), now)).toBe('Yesterday');
    expect(dateGroup(at(2026, 11, 24), now)).toBe('Previous 7 days');
    expect(dateGroup(at(2026, 11, 10), now)).toBe('Previous 30 days');
    expect(dateGroup(at(2026, 9, 10), now, 'en-US')).toBe('September');
    expect(dateGroup(at(2025, 9, 10), now, 'en-US')).toBe('September 2025');
    expect(dateGroup('nonsense', now)).toBe('Older');
  });
  it('groups a newest-first list into consecutive runs', () => {
    const list = [at(2026, 12, 1), at(2026, 12, 1, 8), at(2026, 11, 30), at(2026, 11, 20)].map((u, i) => ({ id: String(i), updated_at: u }));
    expect(groupByDate(list, now).map((g) => [g.label, g.items.map((c) => c.id)])).toEqual([
      ['Today', ['0', '1']],
      ['Yesterday', ['2']],
      ['Previous 30 days', ['3']],
    ]);
  });
});

describe('messageTime', () => {
  it('shows the time today and the date before', () => {
    expect(messageTime(at(2026, 12, 1, 8, 7), now, 'en-GB')).toBe('08:07');
    expect(messageTime(at(2026, 11, 3, 14, 5), now, 'en-GB')).toBe('3 Nov, 14:05');
    expect(messageTime(at(2025, 11, 3, 14, 5), now, 'en-GB')).toBe('3 Nov 2025, 14:05');
  });
});
