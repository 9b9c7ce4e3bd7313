import { isActive } from './protocol';
import type { Subscriptions } from './subscription';
import type { Transport } from './transport';

export interface LivenessOptions {
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  streamingPingIntervalMs?: number;
  streamingPingTimeoutMs?: number;
}

/**
 * While an answer streams, the connection proves it is alive every few
 * seconds, so a path that died without a word (no close, no offline
 * event) shows as "reconnecting" in seconds rather than half a minute.
 */
export class Liveness {
  private readonly idle: { intervalMs: number; timeoutMs: number };
  private readonly streaming: { intervalMs: number; timeoutMs: number };

  constructor(
    private readonly conn: Pick<Transport, 'setLiveness'>,
    private readonly subs: Subscriptions,
    opts: LivenessOptions,
  ) {
    this.idle = { intervalMs: opts.pingIntervalMs ?? 25_000, timeoutMs: opts.pingTimeoutMs ?? 10_000 };
    this.streaming = {
      // Pings off (0) stay off.
      intervalMs: this.idle.intervalMs <= 0 ? 0 : Math.min(opts.streamingPingIntervalMs ?? 5_000, this.idle.intervalMs),
      timeoutMs: Math.min(opts.streamingPingTimeoutMs ?? 3_000, this.idle.timeoutMs),
    };
  }

  /** Sets the pings for what is followed now. */
  update(): void {
    const streaming = this.subs.ids().some((id) => {
      const t = this.subs.get(id)?.task;
      return !t || isActive(t.status);
    });
    const p = streaming ? this.streaming : this.idle;
    this.conn.setLiveness(p.intervalMs, p.timeoutMs);
  }
}
