import { describe, expect, it } from 'vitest';
import { Backoff, backoffCeiling, backoffDelay, defaultBackoff } from '../src/lib/backoff';

describe('backoff', () => {
  it('doubles from 1s and caps at 30s', () => {
    const ceilings = [0, 1, 2, 3, 4, 5, 6, 10, 50, 2000].map((a) => backoffCeiling(a));
    expect(ceilings).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000, 30000]);
  });

  it('jitters over the full window [0, ceiling)', () => {
    for (let a = 0; a < 8; a++) {
      expect(backoffDelay(a, () => 0)).toBe(0);
      expect(backoffDelay(a, () => 0.999999)).toBe(backoffCeiling(a) - 1);
      expect(backoffDelay(a, () => 0.5)).toBe(backoffCeiling(a) / 2);
    }
  });

  it('stays within bounds for random draws', () => {
    for (let i = 0; i < 2000; i++) {
      const a = i % 12;
      const d = backoffDelay(a);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThan(backoffCeiling(a));
    }
  });

  it('advances per retry and resets', () => {
    const b = new Backoff(defaultBackoff, () => 0.5);
    expect([b.next(), b.next(), b.next(), b.next()]).toEqual([500, 1000, 2000, 4000]);
    expect(b.attempts).toBe(4);
    b.spendImmediate();
    expect(b.immediateUsed).toBe(true);
    b.reset();
    expect(b.attempts).toBe(0);
    expect(b.immediateUsed).toBe(false);
    expect(b.next()).toBe(500);
  });

  it('counts a connection healthy after 10s open', () => {
    const b = new Backoff();
    expect(b.healthy(9_999)).toBe(false);
    expect(b.healthy(10_000)).toBe(true);
  });
});
