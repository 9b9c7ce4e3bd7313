import { describe, expect, it } from 'vitest';
import { titleFrom } from '../src/lib/titles';
import cases from '../../internal/task/testdata/titles.json';

describe('titleFrom', () => {
  it('makes the titles the server makes (internal/task/testdata/titles.json)', () => {
    for (const c of cases as { in: string; file?: string; want: string }[]) expect(titleFrom(c.in, c.file), JSON.stringify(c)).toBe(c.want);
  });
});
