/**
 * How long a streaming answer waits before its next Markdown render, given
 * how long the last one took (ms): the next animation frame (0) while
 * renders are cheap; once one takes more than a few milliseconds (a very
 * long answer), four times its cost, so rendering takes at most a fifth of
 * the main thread, and never more than a second between renders.
 */
export function renderDelay(lastCostMs: number): number {
  if (!(lastCostMs > 6)) return 0;
  return Math.min(Math.round(lastCostMs * 4), 1000);
}
