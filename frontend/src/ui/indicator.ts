import type { ConnectionState } from '../lib';
import { attr, h, text } from './dom';

/** The UI's names for connection states (data-state), kept stable for tests. */
export type IndicatorState = 'connecting' | 'live' | 'reconnecting' | 'offline';

export function indicatorState(s: ConnectionState, everOpen: boolean): IndicatorState {
  switch (s.kind) {
    case 'open':
      return 'live';
    case 'offline':
      return 'offline';
    case 'reconnecting':
      return 'reconnecting';
    case 'connecting':
      return s.retry || everOpen ? 'reconnecting' : 'connecting';
    case 'idle':
      return 'offline';
  }
}

/**
 * The connection indicator: connecting, live, reconnecting in Ns (with a
 * button that skips the wait), offline. It counts down once a second while a
 * retry is scheduled.
 */
export class Indicator {
  readonly el: HTMLElement;
  private readonly label: HTMLElement;
  private readonly retry: HTMLButtonElement;
  private timer: number | undefined;
  private everOpen = false;

  constructor(private readonly now: () => number, onRetry: () => void) {
    this.label = h('span', { class: 'indicator-label' });
    this.retry = h('button', { type: 'button', class: 'link-button', 'data-testid': 'reconnect-now', hidden: true }, 'Retry now');
    this.retry.addEventListener('click', onRetry);
    this.el = h('div', { class: 'indicator', role: 'status', 'aria-live': 'polite', 'data-testid': 'connection' }, h('span', { class: 'dot', 'aria-hidden': 'true' }), this.label, this.retry);
  }

  update(s: ConnectionState): void {
    if (s.kind === 'open') this.everOpen = true;
    const state = indicatorState(s, this.everOpen);
    attr(this.el, 'data-state', state);
    const transport = s.kind === 'open' ? (s.transport ?? 'websocket') : null;
    attr(this.el, 'data-transport', transport);
    attr(this.el, 'title', transport === 'http' ? 'WebSocket is not available here: answers come over HTTP, and WebSocket is tried again in the background.' : null);
    window.clearInterval(this.timer);
    this.timer = undefined;
    this.retry.hidden = state !== 'reconnecting' || s.kind !== 'reconnecting';
    const render = () => text(this.label, this.describe(s, state));
    render();
    if (s.kind === 'reconnecting') this.timer = window.setInterval(render, 1000);
  }

  private describe(s: ConnectionState, state: IndicatorState): string {
    switch (state) {
      case 'live':
        return s.kind === 'open' && s.transport === 'http' ? 'Live · HTTP' : 'Live';
      case 'offline':
        return 'Offline';
      case 'connecting':
        return 'Connecting…';
      case 'reconnecting':
        if (s.kind === 'reconnecting') {
          const secs = Math.max(0, Math.ceil((s.retryAt - this.now()) / 1000));
          return secs > 0 ? `Reconnecting in ${secs}s` : 'Reconnecting…';
        }
        return 'Reconnecting…';
    }
  }
}
