import type { ConnectionEvents, ConnectionState, ReplyHandler, SendOptions } from './connection';
import { Emitter } from './emitter';
import { NotConnectedError, TetherError } from './errors';
import { apiRequest, type FetchLike } from './http';
import type { HttpLink } from './httplink';
import type { Platform, TimerHandle } from './platform';
import type { SocketLink } from './shared';
import { Paths, type ClientMessage, type ServerMessage } from './protocol';

/** The transports a tab can use. */
export type TransportKind = 'websocket' | 'http';

/**
 * Whether a tab gives up on WebSocket for now: after `after` upgrades in a
 * row that failed while the HTTP API answered (a proxy or network that
 * blocks WebSocket, or a browser without it). Failures while HTTP fails too
 * are the server being away, which no other transport fixes.
 */
export function shouldFallBack(failedWhileHttpAnswers: number, after: number): boolean {
  return failedWhileHttpAnswers >= after;
}

interface Outgoing {
  msg: ClientMessage;
  handler?: ReplyHandler;
  wait: boolean;
}

export interface TransportOptions {
  /** The WebSocket side: a socket of this tab's own, or the browser's one shared socket. */
  connection: SocketLink;
  http: HttpLink;
  platform: Platform;
  fetch: FetchLike;
  /** Requests that may wait for a transport; default 256. */
  maxQueued?: number;
  /** Failed upgrades in a row (while HTTP answers) before the fallback; default 2. */
  fallbackAfter?: number;
  /** How often the fallback reads what a WebSocket would have pushed, ms; default 10 s. */
  pollMs?: number;
}

/**
 * The tab's one way to the server, whatever carries it: the WebSocket
 * connection while it works, else the HTTP fallback (HttpLink: requests and
 * Server-Sent Events), and the WebSocket again as soon as a background
 * attempt opens one. It owns the queue of requests that wait for a
 * transport (idempotent ones are sent again after a transport was lost
 * before their reply), so a switch loses none; the subscriptions above it
 * re-attach on every open and apply events with the same ordering rule
 * whichever transport brought them.
 */
export class Transport {
  readonly events = new Emitter<ConnectionEvents>();
  private kind: TransportKind = 'websocket';
  private queue: Outgoing[] = [];
  private readonly maxQueued: number;
  private readonly fallbackAfter: number;
  private readonly pollMs: number;
  private failedUpgrades = 0;
  private attempting = false;
  private pollTimer: TimerHandle | null = null;
  private readonly unlisten: Array<() => void> = [];

  constructor(private readonly opts: TransportOptions) {
    this.maxQueued = Math.max(opts.maxQueued ?? 256, 1);
    this.fallbackAfter = Math.max(opts.fallbackAfter ?? 2, 1);
    this.pollMs = opts.pollMs ?? 10_000;
    const ws = opts.connection;
    ws.events.on('state', (s) => this.onWebSocketState(s));
    ws.events.on('open', () => this.onWebSocketOpen());
    ws.events.on('message', (m) => {
      if (this.kind === 'websocket') this.events.emit('message', m);
    });
    ws.events.on('bad', (b) => this.events.emit('bad', b));
    opts.http.events.on('state', (s) => {
      if (this.kind === 'http') this.events.emit('state', s);
    });
    opts.http.events.on('open', () => {
      if (this.kind === 'http') this.opened();
    });
    opts.http.events.on('message', (m) => {
      if (this.kind === 'http') this.events.emit('message', m);
    });
  }

  /** What carries requests now. */
  get transport(): TransportKind {
    return this.kind;
  }

  get state(): ConnectionState {
    return this.kind === 'websocket' ? this.opts.connection.state : this.opts.http.state;
  }

  get queued(): number {
    return this.queue.length;
  }

  start(): void {
    this.opts.connection.start();
    this.unlisten.push(
      this.opts.platform.onOnlineChange((online) => {
        if (this.kind === 'http') this.opts.http.setOnline(online);
      }),
    );
  }

  stop(): void {
    for (const u of this.unlisten.splice(0)) u();
    this.stopPolling();
    this.opts.http.stop();
    this.opts.connection.stop();
    const queued = this.queue;
    this.queue = [];
    for (const out of queued) out.handler?.onFail(new NotConnectedError('connection stopped'));
  }

  reconnectNow(): void {
    if (this.kind === 'http') this.opts.http.reconnectNow();
    this.opts.connection.reconnectNow();
  }

  setLiveness(intervalMs: number, timeoutMs: number): void {
    this.opts.connection.setLiveness(intervalMs, timeoutMs);
  }

  /**
   * Sends msg on the transport that is open, or queues it (wait) until one
   * is, or fails it at once (no wait) with NotConnectedError. A waiting
   * request whose transport went before its reply is queued again.
   */
  send(msg: ClientMessage, handler?: ReplyHandler, opts: SendOptions = {}): void {
    const out: Outgoing = { msg, handler, wait: opts.wait ?? false };
    if (this.state.kind === 'open') {
      this.transmit(out);
      return;
    }
    if (out.wait && this.queue.length < this.maxQueued) {
      this.queue.push(out);
      return;
    }
    handler?.onFail(new NotConnectedError(out.wait ? 'too many requests waiting for the connection' : undefined));
  }

  /** Sends msg and resolves with its reply; an `error` reply rejects with TetherError. */
  request(msg: ClientMessage, opts: SendOptions = {}): Promise<ServerMessage> {
    return new Promise((resolve, reject) => {
      this.send(
        msg,
        {
          onReply: (reply) => (reply.type === 'error' ? reject(new TetherError(reply.code, reply.message)) : resolve(reply)),
          onFail: reject,
        },
        opts,
      );
    });
  }

  private transmit(out: Outgoing): void {
    const handler: ReplyHandler = {
      onReply: (m) => out.handler?.onReply(m),
      onFail: (err) => {
        // Sent again on the next open; never at once (the transport that failed may still say open).
        if (out.wait && err instanceof NotConnectedError && this.queue.length < this.maxQueued) this.queue.push(out);
        else out.handler?.onFail(err);
      },
    };
    if (this.kind === 'websocket') this.opts.connection.send(out.msg, handler, { wait: false });
    else this.opts.http.send(out.msg, handler);
  }

  /** A transport opened: subscriptions re-attach first, then the queue goes out in order. */
  private opened(): void {
    this.events.emit('open', undefined);
    const queued = this.queue;
    this.queue = [];
    for (const out of queued) {
      if (this.state.kind === 'open') this.transmit(out);
      else this.queue.push(out);
    }
  }

  private onWebSocketState(s: ConnectionState): void {
    if (s.kind === 'connecting') this.attempting = true;
    else if (s.kind === 'open') {
      this.attempting = false;
      this.failedUpgrades = 0;
    } else if (this.attempting) {
      // An attempt that never opened.
      this.attempting = false;
      if (this.kind === 'websocket') void this.upgradeFailed();
    }
    if (this.kind === 'websocket') this.events.emit('state', s);
  }

  private onWebSocketOpen(): void {
    if (this.kind === 'http') {
      // WebSocket works again: everything moves back to it.
      this.kind = 'websocket';
      this.stopPolling();
      this.opts.http.stop();
      this.events.emit('state', this.opts.connection.state);
    }
    this.opened();
  }

  /** Asks the HTTP API whether the server is there; if it is, WebSocket is what fails. */
  private async upgradeFailed(): Promise<void> {
    let answers = false;
    try {
      await apiRequest(this.opts.fetch, 'GET', `${Paths.conversations}?limit=1`);
      answers = true;
    } catch (err) {
      answers = err instanceof TetherError && err.code !== 'unavailable';
    }
    if (this.kind !== 'websocket' || this.opts.connection.state.kind === 'open') return;
    this.failedUpgrades = answers ? this.failedUpgrades + 1 : 0;
    if (!shouldFallBack(this.failedUpgrades, this.fallbackAfter)) return;
    this.kind = 'http';
    this.opts.http.start(true);
    this.startPolling();
  }

  private startPolling(): void {
    this.stopPolling();
    const tick = () => {
      this.pollTimer = this.opts.platform.setTimeout(tick, this.pollMs);
      if (this.kind === 'http' && this.opts.http.state.kind === 'open') this.events.emit('poll', undefined);
    };
    this.pollTimer = this.opts.platform.setTimeout(tick, this.pollMs);
  }

  private stopPolling(): void {
    if (this.pollTimer !== null) this.opts.platform.clearTimeout(this.pollTimer);
    this.pollTimer = null;
  }
}
