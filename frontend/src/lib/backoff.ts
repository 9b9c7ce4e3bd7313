/** Reconnect timing: exponential backoff with full jitter (PROTOCOL.md section 4). */
export interface BackoffOptions {
  /** First ceiling, ms. */
  baseMs: number;
  /** Largest ceiling, ms. */
  maxMs: number;
  /** How long a connection must stay open before the next failure starts over, ms. */
  healthyMs: number;
}

export const defaultBackoff: BackoffOptions = { baseMs: 1000, maxMs: 30_000, healthyMs: 10_000 };

/** The ceiling of the attempt-th retry (0-based): base * 2^attempt, capped. */
export function backoffCeiling(attempt: number, opts: BackoffOptions = defaultBackoff): number {
  const exp = Math.min(attempt, 30); // 2^30 s is far past any cap; avoid Infinity
  return Math.min(opts.maxMs, opts.baseMs * 2 ** exp);
}

/**
 * The delay before the attempt-th retry: uniform in [0, ceiling). Full jitter
 * (rather than a fixed schedule) spreads the tabs of a restarted gateway over
 * the window instead of sending them all back at the same instant.
 * `random` returns a number in [0, 1), like Math.random.
 */
export function backoffDelay(attempt: number, random: () => number = Math.random, opts: BackoffOptions = defaultBackoff): number {
  return Math.floor(random() * backoffCeiling(attempt, opts));
}

/**
 * Counts consecutive failures; a healthy connection starts it over. It also
 * remembers whether the one delay-free retry that a 1012/1013 close earns has
 * been spent, so a server that keeps closing at once cannot make a tab spin.
 */
export class Backoff {
  private attempt = 0;
  private immediateSpent = false;

  constructor(
    private readonly opts: BackoffOptions = defaultBackoff,
    private readonly random: () => number = Math.random,
  ) {}

  /** Number of delayed retries since the last reset. */
  get attempts(): number {
    return this.attempt;
  }

  /** Whether the delay-free retry was used since the last reset. */
  get immediateUsed(): boolean {
    return this.immediateSpent;
  }

  /** The delay for the next retry; advances the count. */
  next(): number {
    const d = backoffDelay(this.attempt, this.random, this.opts);
    this.attempt++;
    return d;
  }

  /** Records that a retry was made at once. */
  spendImmediate(): void {
    this.immediateSpent = true;
  }

  reset(): void {
    this.attempt = 0;
    this.immediateSpent = false;
  }

  /** Whether a connection open for openMs was healthy enough to reset. */
  healthy(openMs: number): boolean {
    return openMs >= this.opts.healthyMs;
  }
}
