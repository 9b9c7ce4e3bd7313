import { Backoff, defaultBackoff, type BackoffOptions } from './backoff';
import { planReconnect } from './close';
import { Emitter } from './emitter';
import { NotConnectedError, TetherError } from './errors';
import { parseFrame } from './frame';
import type { Platform, SocketLike, TimerHandle } from './platform';
import { CloseCode, type ClientMessage, type ServerMessage } from './protocol';

/**
 * The connection's state, as a tab shows it:
 * - idle: not started, or stopped by the app;
 * - connecting: a socket is opening (`retry` when it is not the first);
 * - open: live (`transport` says over what: a WebSocket, or the HTTP fallback);
 * - reconnecting: waiting `delayMs` (until `retryAt`, a platform.now() time) before the next try;
 * - offline: the browser says it has no network; the `online` event resumes.
 */
export type ConnectionState =
  | { kind: 'idle' }
  | { kind: 'connecting'; retry: boolean }
  | { kind: 'open'; transport?: 'websocket' | 'http' }
  | { kind: 'reconnecting'; delayMs: number; retryAt: number; reason: string; code: number }
  | { kind: 'offline' };

export interface ConnectionOptions {
  /** Full WebSocket URL, or a function called before every connect (e.g. to add a fresh ?token=). */
  url: string | (() => string);
  platform: Platform;
  backoff?: BackoffOptions;
  /** Application-level ping period while open, ms; 0 disables. Detects a dead path the browser has not noticed. */
  pingIntervalMs?: number;
  /** How long a ping may wait for its pong before the connection is declared dead, ms. */
  pingTimeoutMs?: number;
  /** How long a socket may take to open, ms. */
  connectTimeoutMs?: number;
  /**
   * Called before a retry that follows an attempt that never opened, so the
   * app can refresh its session (the gateway sets its cookie on an ordinary
   * HTTP request; a WebSocket upgrade refused with 401 looks like any failure).
   */
  beforeRetry?: () => Promise<void>;
  /**
   * Requests that may wait for the connection (`wait`) held at most; beyond
   * it a new one fails at once with NotConnectedError, so a long outage
   * cannot grow the queue without bound. Default 256.
   */
  maxQueued?: number;
}

/** How a request behaves when the connection is not open. */
export interface SendOptions {
  /**
   * true: wait for the connection, and if it drops before the reply, send it
   * again on the next one (for idempotent requests). false: fail at once with
   * NotConnectedError.
   */
  wait?: boolean;
}

export interface ReplyHandler {
  /** The direct reply (which may be an `error`). Called synchronously while the frame is handled. */
  onReply(msg: ServerMessage): void;
  /** The request will not be answered (not connected, or closed before the reply). */
  onFail(err: Error): void;
}

interface Outgoing {
  msg: ClientMessage;
  handler?: ReplyHandler;
  wait: boolean;
}

export interface ConnectionEvents extends Record<string, unknown> {
  state: ConnectionState;
  /** The socket opened; resubscribe here. Fired before queued requests are flushed. */
  open: undefined;
  /** A server message that is not the reply of a pending request: events, `task`, unsolicited errors. */
  message: ServerMessage;
  /** A frame line that was not a JSON object. */
  bad: string;
  /**
   * Over the HTTP fallback only, every few seconds: what a WebSocket would
   * have pushed (another device's new task) must be read; the client
   * refreshes the list and the open conversation.
   */
  poll: undefined;
}

const socketOpen = 1;

/**
 * One tab's connection to `/v1/ws`: a state machine that keeps a socket open
 * for as long as the app wants one, with full-jitter exponential backoff
 * between failed attempts, an immediate first retry on 1012/1013, awareness of
 * the network (navigator.onLine) and of the page's visibility, request/reply
 * matching on `req`, and in-order handling of coalesced frames.
 */
export class Connection {
  readonly events = new Emitter<ConnectionEvents>();
  private st: ConnectionState = { kind: 'idle' };
  private socket: SocketLike | null = null;
  private readonly backoff: Backoff;
  private readonly platform: Platform;
  private retryTimer: TimerHandle | null = null;
  private connectTimer: TimerHandle | null = null;
  private pingTimer: TimerHandle | null = null;
  private pongTimer: TimerHandle | null = null;
  private openedAt = 0;
  private lastAttemptOpened = true;
  private nextReq = 1;
  private readonly pending = new Map<string, Outgoing>();
  private queue: Outgoing[] = [];
  private readonly unlisten: Array<() => void> = [];
  private pingIntervalMs: number;
  private pingTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly maxQueued: number;

  constructor(private readonly opts: ConnectionOptions) {
    this.platform = opts.platform;
    this.backoff = new Backoff(opts.backoff ?? defaultBackoff, () => this.platform.random());
    this.pingIntervalMs = opts.pingIntervalMs ?? 25_000;
    this.pingTimeoutMs = opts.pingTimeoutMs ?? 10_000;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 15_000;
    this.maxQueued = Math.max(opts.maxQueued ?? 256, 1);
  }

  get state(): ConnectionState {
    return this.st;
  }

  /** Starts connecting (or waits for the network when offline). Idempotent. */
  start(): void {
    if (this.st.kind !== 'idle') return;
    this.unlisten.push(
      this.platform.onOnlineChange((online) => this.onOnlineChange(online)),
      this.platform.onVisibilityChange((visible) => this.onVisible(visible)),
    );
    if (!this.platform.online()) this.setState({ kind: 'offline' });
    else this.connect(false);
  }

  /** Closes the connection for good and fails every outstanding request. */
  stop(): void {
    for (const u of this.unlisten.splice(0)) u();
    this.clearTimers();
    const s = this.socket;
    this.socket = null;
    if (s) {
      detach(s);
      s.close(CloseCode.Normal, 'client stopped');
    }
    this.failAll(new NotConnectedError('connection stopped'), true);
    this.setState({ kind: 'idle' });
  }

  /** Skips the remaining backoff delay (a "retry now" button, or the page became visible). */
  reconnectNow(): void {
    if (this.st.kind === 'reconnecting' || this.st.kind === 'offline') {
      this.clearRetry();
      this.connect(true);
    }
  }

  /**
   * Sends msg with a fresh `req` and routes its reply to handler, or queues it
   * (wait) or fails it (no wait) while the connection is not open.
   */
  send(msg: ClientMessage, handler?: ReplyHandler, opts: SendOptions = {}): void {
    const out: Outgoing = { msg, handler, wait: opts.wait ?? false };
    if (this.st.kind === 'open' && this.socket) {
      this.transmit(out);
      return;
    }
    if (out.wait && this.queue.length < this.maxQueued) {
      this.queue.push(out);
      return;
    }
    handler?.onFail(new NotConnectedError(out.wait ? 'too many requests waiting for the connection' : undefined));
  }

  /**
   * Changes how often an open connection proves it is alive (a ping that
   * must be answered within timeoutMs). The client pings often while an
   * answer streams, so a path that died silently shows within seconds.
   */
  setLiveness(intervalMs: number, timeoutMs: number): void {
    if (intervalMs === this.pingIntervalMs && timeoutMs === this.pingTimeoutMs) return;
    this.pingIntervalMs = intervalMs;
    this.pingTimeoutMs = timeoutMs;
    if (this.st.kind === 'open' && this.pongTimer === null) this.schedulePing();
  }

  /** How many requests wait for the connection. */
  get queued(): number {
    return this.queue.length;
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
    const req = `r${this.nextReq++}`;
    const frame = { ...out.msg, req };
    if (out.handler || out.wait) this.pending.set(req, out);
    try {
      this.socket!.send(JSON.stringify(frame));
    } catch (err) {
      this.pending.delete(req);
      if (out.wait) this.queue.push(out);
      else out.handler?.onFail(err instanceof Error ? err : new NotConnectedError(String(err)));
    }
  }

  private setState(s: ConnectionState): void {
    this.st = s;
    this.events.emit('state', s);
  }

  private connect(retry: boolean): void {
    this.clearTimers();
    const url = typeof this.opts.url === 'function' ? this.opts.url() : this.opts.url;
    this.setState({ kind: 'connecting', retry });
    this.lastAttemptOpened = false;
    let s: SocketLike;
    try {
      s = this.platform.createSocket(url);
    } catch {
      this.closed(CloseCode.Abnormal);
      return;
    }
    this.socket = s;
    s.onopen = () => this.opened(s);
    s.onmessage = (ev) => {
      if (this.socket === s && typeof ev.data === 'string') this.frame(ev.data);
    };
    s.onclose = (ev) => {
      if (this.socket === s) this.closed(ev.code);
    };
    s.onerror = () => {
      /* onclose follows and decides */
    };
    this.connectTimer = this.platform.setTimeout(() => {
      if (this.socket === s && this.st.kind === 'connecting') this.abandon(s);
    }, this.connectTimeoutMs);
  }

  private opened(s: SocketLike): void {
    if (this.socket !== s) return;
    this.clearConnectTimer();
    this.openedAt = this.platform.now();
    this.lastAttemptOpened = true;
    this.setState({ kind: 'open', transport: 'websocket' });
    this.events.emit('open', undefined);
    if (this.socket !== s) return; // an open handler may have stopped us
    const queued = this.queue;
    this.queue = [];
    for (const out of queued) this.transmit(out);
    this.schedulePing();
  }

  private frame(data: string): void {
    const { messages, bad } = parseFrame(data);
    for (const b of bad) this.events.emit('bad', b);
    for (const m of messages) {
      const req = 'req' in m ? m.req : undefined;
      const out = req !== undefined ? this.pending.get(req) : undefined;
      if (req !== undefined && out) {
        this.pending.delete(req);
        if (m.type === 'pong') this.clearPong();
        out.handler?.onReply(m);
        continue;
      }
      if (m.type === 'pong') {
        this.clearPong();
        continue;
      }
      this.events.emit('message', m);
    }
  }

  /** Drops a socket that is not healthy without waiting for a close handshake that may never come. */
  private abandon(s: SocketLike): void {
    detach(s);
    try {
      s.close(4000, 'unresponsive');
    } catch {
      /* already closing */
    }
    if (this.socket === s) this.closed(CloseCode.Abnormal);
  }

  private closed(code: number): void {
    const wasOpen = this.lastAttemptOpened && this.openedAt > 0 && this.st.kind === 'open';
    if (wasOpen && this.backoff.healthy(this.platform.now() - this.openedAt)) this.backoff.reset();
    this.socket = null;
    this.clearTimers();
    this.failAll(new NotConnectedError('connection closed'), false);
    const plan = planReconnect({
      code,
      byClient: false,
      online: this.platform.online(),
      immediateUsed: this.backoff.immediateUsed,
    });
    switch (plan.kind) {
      case 'stop':
        this.setState({ kind: 'idle' });
        return;
      case 'offline':
        this.setState({ kind: 'offline' });
        return;
      case 'now':
        this.backoff.spendImmediate();
        this.connect(true);
        return;
      case 'wait': {
        const delayMs = this.backoff.next();
        const retryAt = this.platform.now() + delayMs;
        this.setState({ kind: 'reconnecting', delayMs, retryAt, reason: plan.reason, code });
        const refresh = !this.lastAttemptOpened && this.opts.beforeRetry;
        this.retryTimer = this.platform.setTimeout(() => {
          this.retryTimer = null;
          if (!refresh) {
            this.connect(true);
            return;
          }
          refresh().then(
            () => this.retryIfWaiting(),
            () => this.retryIfWaiting(),
          );
        }, delayMs);
      }
    }
  }

  private retryIfWaiting(): void {
    if (this.st.kind === 'reconnecting') this.connect(true);
  }

  /** Fails the replies still owed; requests that may wait go back in the queue. */
  private failAll(err: Error, includeWaiting: boolean): void {
    const outs = [...this.pending.values()];
    this.pending.clear();
    const requeue: Outgoing[] = [];
    for (const out of outs) {
      if (out.wait && !includeWaiting) requeue.push(out);
      else out.handler?.onFail(err);
    }
    if (includeWaiting) {
      const queued = this.queue;
      this.queue = [];
      for (const out of queued) out.handler?.onFail(err);
    } else {
      this.queue = [...requeue, ...this.queue];
    }
  }

  private onOnlineChange(online: boolean): void {
    if (online) {
      if (this.st.kind === 'offline' || this.st.kind === 'reconnecting') {
        this.clearRetry();
        this.connect(true);
      }
      return;
    }
    if (this.st.kind === 'reconnecting') {
      this.clearRetry();
      this.setState({ kind: 'offline' });
    } else if ((this.st.kind === 'open' || this.st.kind === 'connecting') && this.socket) {
      // Nothing can arrive while the browser has no network, and a socket
      // can look open for many seconds after it went (Chromium keeps it
      // until a write fails): say so now, and come back with a fresh
      // snapshot once the network is back. A blip costs one reconnect.
      this.abandon(this.socket);
    }
  }

  private onVisible(visible: boolean): void {
    if (!visible) return;
    if (this.st.kind === 'reconnecting') this.reconnectNow();
    else if (this.st.kind === 'open') this.ping();
  }

  private schedulePing(): void {
    if (this.pingIntervalMs <= 0) return;
    if (this.pingTimer !== null) this.platform.clearTimeout(this.pingTimer);
    this.pingTimer = this.platform.setTimeout(() => {
      this.pingTimer = null;
      this.ping();
    }, this.pingIntervalMs);
  }

  /** Sends a ping and gives the socket pingTimeoutMs to answer. */
  private ping(): void {
    const s = this.socket;
    if (!s || this.st.kind !== 'open' || this.pongTimer !== null) return;
    this.transmit({ msg: { type: 'ping' }, wait: false, handler: { onReply: () => {}, onFail: () => {} } });
    this.pongTimer = this.platform.setTimeout(() => {
      this.pongTimer = null;
      if (this.socket === s) this.abandon(s);
    }, this.pingTimeoutMs);
  }

  private clearPong(): void {
    if (this.pongTimer !== null) this.platform.clearTimeout(this.pongTimer);
    this.pongTimer = null;
    this.schedulePing();
  }

  private clearRetry(): void {
    if (this.retryTimer !== null) this.platform.clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private clearConnectTimer(): void {
    if (this.connectTimer !== null) this.platform.clearTimeout(this.connectTimer);
    this.connectTimer = null;
  }

  private clearTimers(): void {
    this.clearRetry();
    this.clearConnectTimer();
    if (this.pingTimer !== null) this.platform.clearTimeout(this.pingTimer);
    if (this.pongTimer !== null) this.platform.clearTimeout(this.pongTimer);
    this.pingTimer = null;
    this.pongTimer = null;
  }
}

function detach(s: SocketLike): void {
  s.onopen = null;
  s.onmessage = null;
  s.onclose = null;
  s.onerror = null;
}
