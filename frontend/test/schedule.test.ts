import { describe, expect, it } from 'vitest';
import { renderDelay } from '../src/ui/schedule';

describe('renderDelay', () => {
  it('renders on the next frame while renders are cheap', () => {
    expect(renderDelay(0)).toBe(0);
    expect(renderDelay(5.9)).toBe(0);
    expect(renderDelay(Number.NaN)).toBe(0);
  });
  it('backs off to four times the cost of a slow render, at most a second', () => {
    expect(renderDelay(10)).toBe(40);
    expect(renderDelay(100)).toBe(400);
    expect(renderDelay(900)).toBe(1000);
  });
});
