import type { Connection, ConnectionEvents, ConnectionState, ReplyHandler, SendOptions } from './connection';
import { Emitter } from './emitter';
import { NotConnectedError } from './errors';
import type { Platform } from './platform';
import type { ClientMessage, ServerMessage } from './protocol';
import { followerStep, Interest, isLinkMessage, planRequest, refused, strictestLiveness, type LinkMessage } from './sharing';

/**
 * What Transport needs of the WebSocket side: a Connection (one socket per
 * tab), or a SharedConnection (one socket per browser). send never waits:
 * Transport owns the queue of requests that wait for a connection.
 */
export interface SocketLink {
  readonly events: Emitter<ConnectionEvents>;
  readonly state: ConnectionState;
  start(): void;
  stop(): void;
  reconnectNow(): void;
  setLiveness(intervalMs: number, timeoutMs: number): void;
  send(msg: ClientMessage, handler?: ReplyHandler, opts?: SendOptions): void;
}

/** The channel between the tabs of one browser (BroadcastChannel): ordered, to every other tab. */
export interface LinkBus {
  post(m: LinkMessage): void;
  listen(cb: (m: LinkMessage) => void): () => void;
  close(): void;
}

/**
 * Elects one leader among the tabs (a Web Lock): onLeader runs when this tab
 * becomes it (at once for the first tab; when the leader closes or crashes
 * for the next one). The returned function gives the lock up, or stops
 * waiting for it.
 */
export interface LinkElector {
  elect(onLeader: () => void): () => void;
}

export interface SharedConnectionOptions {
  /** This tab's id on the bus (random, per page load). */
  tab: string;
  bus: LinkBus;
  elector: LinkElector;
  /** Makes the real connection when this tab becomes the leader. */
  connect: () => Connection;
  platform: Platform;
}

interface Waiting {
  handler?: ReplyHandler;
}

/**
 * One WebSocket per browser. The tab that holds the leader lock holds the
 * socket and serves every other tab of the browser over the bus: a
 * follower's request goes to the leader, which sends it on the socket and
 * routes the reply back to that tab alone (addressed by tab id and the
 * follower's own request number); every other server message (events,
 * `task` and `conversation` events) goes to every tab, and each tab's
 * Subscriptions keeps what it follows in (attempt, seq) order, as with a
 * socket of its own. The leader counts which tabs follow each task, so one
 * tab's unsubscribe never ends another's stream.
 *
 * A follower shows the leader's connection state as its own. When the
 * leader goes (closed, reloaded, crashed) the lock passes to another tab,
 * which opens a socket and says so; every tab fails what it had asked of the
 * old leader (Transport sends the idempotent ones again) and, once the new
 * socket is open, subscribes its tasks again, getting a fresh snapshot each:
 * the same resume as after any reconnect, so a stream in progress ends
 * exact.
 */
export class SharedConnection implements SocketLink {
  readonly events = new Emitter<ConnectionEvents>();
  private st: ConnectionState = { kind: 'idle' };
  private conn: Connection | null = null;
  private leader: string | null = null;
  private release: (() => void) | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Waiting>();
  private readonly interest = new Interest();
  private readonly wishes = new Map<string, { intervalMs: number; timeoutMs: number }>();
  private readonly unlisten: Array<() => void> = [];
  private started = false;

  constructor(private readonly opts: SharedConnectionOptions) {}

  get state(): ConnectionState {
    return this.st;
  }

  /** Whether this tab holds the socket. */
  get isLeader(): boolean {
    return this.conn !== null;
  }

  /** The tab id of the leader this tab knows (its own when it leads), or null. */
  get leaderTab(): string | null {
    return this.leader;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.setState({ kind: 'connecting', retry: false });
    this.unlisten.push(
      this.opts.bus.listen((m) => this.onBus(m)),
      this.opts.platform.onVisibilityChange((visible) => {
        if (visible && !this.conn && this.st.kind === 'reconnecting') this.post({ t: 'reconnect', from: this.opts.tab });
      }),
    );
    this.post({ t: 'hello', from: this.opts.tab });
    this.release = this.opts.elector.elect(() => this.lead());
  }

  /** Leaves for good: the leader closes its socket and gives the lock up, a follower says goodbye. */
  stop(): void {
    if (!this.started) return;
    this.started = false;
    this.post({ t: 'bye', from: this.opts.tab });
    for (const u of this.unlisten.splice(0)) u();
    const conn = this.conn;
    this.conn = null;
    if (conn) {
      for (const u of this.connUnlisten.splice(0)) u();
      conn.stop();
      // The followers stop counting on this socket now, not when the next leader speaks.
      this.post({ t: 'state', from: this.opts.tab, state: { kind: 'idle' } });
    }
    this.release?.();
    this.release = null;
    this.leader = null;
    this.failPending('connection stopped');
    this.opts.bus.close();
    this.setState({ kind: 'idle' });
  }

  /** The page is going (pagehide): the leader drops what only this tab followed; the browser frees the lock. */
  leave(): void {
    if (this.started && !this.conn) this.post({ t: 'bye', from: this.opts.tab });
  }

  reconnectNow(): void {
    if (this.conn) this.conn.reconnectNow();
    else if (this.started) this.post({ t: 'reconnect', from: this.opts.tab });
  }

  setLiveness(intervalMs: number, timeoutMs: number): void {
    const w = this.wishes.get(this.opts.tab);
    if (w && w.intervalMs === intervalMs && w.timeoutMs === timeoutMs) return;
    this.wishes.set(this.opts.tab, { intervalMs, timeoutMs });
    if (this.conn) this.applyLiveness();
    else if (this.leader) this.post({ t: 'liveness', from: this.opts.tab, intervalMs, timeoutMs });
  }

  send(msg: ClientMessage, handler?: ReplyHandler): void {
    if (this.st.kind !== 'open') {
      handler?.onFail(new NotConnectedError());
      return;
    }
    if (this.conn) {
      this.serve(this.opts.tab, msg, {
        onReply: (r) => handler?.onReply(r),
        onFail: (e) => handler?.onFail(e),
      });
      return;
    }
    const id = this.nextId++;
    this.pending.set(id, { handler });
    const { req: _req, ...bare } = msg as ClientMessage & { req?: string };
    this.post({ t: 'req', from: this.opts.tab, to: this.leader!, id, msg: bare as ClientMessage });
  }

  // ---- leader ---------------------------------------------------------------

  private readonly connUnlisten: Array<() => void> = [];

  /** This tab got the lock: it opens the socket and serves every tab. */
  private lead(): void {
    if (!this.started || this.conn) return;
    this.failPending('the leader tab went');
    this.leader = this.opts.tab;
    const conn = this.opts.connect();
    this.conn = conn;
    this.interest.clear();
    this.connUnlisten.push(
      conn.events.on('state', (s) => {
        if (s.kind !== 'open') this.interest.clear();
        this.setState(s);
        this.post({ t: 'state', from: this.opts.tab, state: s });
      }),
      conn.events.on('open', () => this.events.emit('open', undefined)),
      conn.events.on('message', (m) => {
        this.events.emit('message', m);
        this.post({ t: 'msg', from: this.opts.tab, msg: m });
      }),
      conn.events.on('bad', (b) => this.events.emit('bad', b)),
      conn.events.on('poll', () => this.events.emit('poll', undefined)),
    );
    this.applyLiveness();
    conn.start();
  }

  /** Sends a tab's request on the socket, or answers it here (an unsubscribe another tab's interest outlives). */
  private serve(tab: string, msg: ClientMessage, handler: ReplyHandler): void {
    const conn = this.conn!;
    const plan = planRequest(this.interest, tab, msg);
    if (plan.kind === 'answer') {
      handler.onReply(plan.reply);
      return;
    }
    conn.send(msg, {
      onReply: (r) => {
        refused(this.interest, tab, msg, r);
        handler.onReply(r);
      },
      onFail: (e) => handler.onFail(e),
    });
  }

  private onRequest(m: Extract<LinkMessage, { t: 'req' }>): void {
    const to = m.from;
    if (!this.conn || this.conn.state.kind !== 'open') {
      this.post({ t: 'fail', to, id: m.id, reason: 'not connected' });
      return;
    }
    this.serve(to, m.msg, {
      onReply: (msg) => this.post({ t: 'reply', to, id: m.id, msg }),
      onFail: (e) => this.post({ t: 'fail', to, id: m.id, reason: e.message }),
    });
  }

  private applyLiveness(): void {
    const l = strictestLiveness(this.wishes.values());
    if (l && this.conn) this.conn.setLiveness(l.intervalMs, l.timeoutMs);
  }

  private onLeaderBus(m: LinkMessage): void {
    const conn = this.conn!;
    switch (m.t) {
      case 'hello':
        // A new tab, as when a page becomes visible: a retry waiting for its backoff goes now.
        this.post({ t: 'state', from: this.opts.tab, state: conn.state });
        if (conn.state.kind === 'reconnecting') conn.reconnectNow();
        return;
      case 'req':
        if (m.to === this.opts.tab) this.onRequest(m);
        return;
      case 'bye':
        this.wishes.delete(m.from);
        this.applyLiveness();
        for (const task of this.interest.dropTab(m.from)) {
          if (conn.state.kind === 'open') conn.send({ type: 'unsubscribe', task_id: task });
        }
        return;
      case 'reconnect':
        conn.reconnectNow();
        return;
      case 'liveness':
        this.wishes.set(m.from, { intervalMs: m.intervalMs, timeoutMs: m.timeoutMs });
        this.applyLiveness();
        return;
      default:
        // Another tab's state or messages: only a leader sends them, and the lock makes this tab the only one.
        return;
    }
  }

  // ---- follower -------------------------------------------------------------

  private onBus(m: LinkMessage): void {
    if (this.conn) {
      this.onLeaderBus(m);
      return;
    }
    switch (m.t) {
      case 'state':
        this.onLeaderState(m.from, m.state);
        return;
      case 'msg':
        if (m.from === this.leader && this.st.kind === 'open') this.events.emit('message', m.msg);
        return;
      case 'reply': {
        if (m.to !== this.opts.tab) return;
        const w = this.pending.get(m.id);
        this.pending.delete(m.id);
        w?.handler?.onReply(m.msg);
        return;
      }
      case 'fail': {
        if (m.to !== this.opts.tab) return;
        const w = this.pending.get(m.id);
        this.pending.delete(m.id);
        w?.handler?.onFail(new NotConnectedError(m.reason));
        return;
      }
      default:
        return;
    }
  }

  private onLeaderState(from: string, announced: ConnectionState): void {
    const step = followerStep(this.leader, from, this.st, announced);
    this.leader = from;
    if (step.failPending) this.failPending(step.states.length > 1 ? 'the leader tab went' : 'connection closed');
    for (const s of step.states) this.setState(s);
    if (step.greet) {
      const w = this.wishes.get(this.opts.tab);
      if (w) this.post({ t: 'liveness', from: this.opts.tab, ...w });
    }
    if (step.open) this.events.emit('open', undefined);
  }

  private failPending(reason: string): void {
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const w of waiting) w.handler?.onFail(new NotConnectedError(reason));
  }

  // ---- both -----------------------------------------------------------------

  private setState(s: ConnectionState): void {
    this.st = s;
    this.events.emit('state', s);
  }

  private post(m: LinkMessage): void {
    try {
      this.opts.bus.post(m);
    } catch {
      /* the channel is closed: the page is going */
    }
  }
}

const lockName = 'tether-connection';
const channelName = 'tether.v1.link';

/**
 * The browser's bus and elector: BroadcastChannel and the Web Locks API.
 * null where either is missing (each tab then keeps a socket of its own).
 */
export function browserSharing(): { bus: LinkBus; elector: LinkElector; onLeave: (fn: () => void) => () => void } | null {
  const g = globalThis as typeof globalThis & {
    navigator?: { locks?: { request(name: string, opts: { signal?: AbortSignal }, cb: () => Promise<void>): Promise<void> } };
  };
  const locks = g.navigator?.locks;
  if (!locks || typeof BroadcastChannel !== 'function' || typeof AbortController !== 'function') return null;
  let bc: BroadcastChannel;
  try {
    bc = new BroadcastChannel(channelName);
  } catch {
    return null; // an opaque origin
  }
  const bus: LinkBus = {
    post: (m) => bc.postMessage(m),
    listen: (cb) => {
      const h = (ev: MessageEvent) => {
        if (isLinkMessage(ev.data)) cb(ev.data);
      };
      bc.addEventListener('message', h);
      return () => bc.removeEventListener('message', h);
    },
    close: () => bc.close(),
  };
  const elector: LinkElector = {
    elect: (onLeader) => {
      const abort = new AbortController();
      let give: (() => void) | null = null;
      locks
        .request(lockName, { signal: abort.signal }, () => {
          onLeader();
          // Held until this tab stops or its page goes (the browser frees it then).
          return new Promise<void>((resolve) => (give = resolve));
        })
        .catch(() => {
          // Aborted while waiting (this tab stopped), or refused (a context
          // without locks, as a sandboxed frame): then this tab keeps a
          // socket of its own, as where there are no locks at all.
          if (!abort.signal.aborted) onLeader();
        });
      return () => {
        if (give) give();
        else abort.abort();
      };
    },
  };
  const onLeave = (fn: () => void) => {
    const h = (ev: { persisted?: boolean }) => {
      // A page kept in the back/forward cache may come back: it keeps its place.
      if (!ev.persisted) fn();
    };
    globalThis.addEventListener?.('pagehide', h as EventListener);
    return () => globalThis.removeEventListener?.('pagehide', h as EventListener);
  };
  return { bus, elector, onLeave };
}
