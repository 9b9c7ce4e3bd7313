import type { Platform, SocketLike } from '../src/lib/platform';
import type { KeyValue } from '../src/lib/storage';
import type { SyncMessage, TabChannel } from '../src/lib/tabsync';
import type { ClientMessage, ServerMessage, Task } from '../src/lib/protocol';
import type { LinkBus, LinkElector } from '../src/lib/shared';
import type { LinkMessage } from '../src/lib/sharing';

/** A WebSocket double: records what the client sends, lets a test open, close and push frames. */
export class FakeSocket implements SocketLike {
  readyState = 0;
  sent: ClientMessage[] = [];
  closedWith: number | null = null;
  onopen: ((ev: unknown) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  /** Called on every send, before it is recorded (to observe storage at that moment). */
  onSend: ((msg: ClientMessage) => void) | null = null;

  constructor(readonly url: string) {}

  send(data: string): void {
    if (this.readyState !== 1) throw new Error('send on a socket that is not open');
    const msg = JSON.parse(data) as ClientMessage;
    this.onSend?.(msg);
    this.sent.push(msg);
  }
  close(code = 1000): void {
    this.closedWith = code;
    this.readyState = 3;
  }
  // test side
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }
  serverClose(code: number): void {
    this.readyState = 3;
    this.onclose?.({ code, reason: '' });
  }
  push(...msgs: ServerMessage[]): void {
    this.onmessage?.({ data: msgs.map((m) => JSON.stringify(m)).join('\n') });
  }
  raw(data: string): void {
    this.onmessage?.({ data });
  }
  /** The last sent message of a type. */
  last<T extends ClientMessage['type']>(type: T): Extract<ClientMessage, { type: T }> {
    const m = [...this.sent].reverse().find((x) => x.type === type);
    if (!m) throw new Error(`no ${type} sent; sent: ${JSON.stringify(this.sent)}`);
    return m as Extract<ClientMessage, { type: T }>;
  }
  ofType<T extends ClientMessage['type']>(type: T): Array<Extract<ClientMessage, { type: T }>> {
    return this.sent.filter((x) => x.type === type) as Array<Extract<ClientMessage, { type: T }>>;
  }
}

interface Timer {
  id: number;
  at: number;
  fn: () => void;
}

/** A platform with a manual clock, fake sockets and switchable network and visibility. */
export class FakePlatform implements Platform {
  clock = 1_000_000;
  sockets: FakeSocket[] = [];
  isOnline = true;
  isVisible = true;
  rand = 0.5;
  private timers: Timer[] = [];
  private nextId = 1;
  private frames = new Map<number, () => void>();
  private onlineCbs = new Set<(o: boolean) => void>();
  private visCbs = new Set<(v: boolean) => void>();

  createSocket(url: string): SocketLike {
    const s = new FakeSocket(url);
    this.sockets.push(s);
    return s;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const t = { id: this.nextId++, at: this.clock + ms, fn };
    this.timers.push(t);
    return t.id;
  }
  clearTimeout(h: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== h);
  }
  now(): number {
    return this.clock;
  }
  random(): number {
    return this.rand;
  }
  online(): boolean {
    return this.isOnline;
  }
  onOnlineChange(cb: (online: boolean) => void): () => void {
    this.onlineCbs.add(cb);
    return () => this.onlineCbs.delete(cb);
  }
  visible(): boolean {
    return this.isVisible;
  }
  onVisibilityChange(cb: (visible: boolean) => void): () => void {
    this.visCbs.add(cb);
    return () => this.visCbs.delete(cb);
  }
  requestFrame(fn: () => void): unknown {
    const id = this.nextId++;
    this.frames.set(id, fn);
    return id;
  }
  cancelFrame(h: unknown): void {
    this.frames.delete(h as number);
  }
  // test side
  /** Paints a frame: runs what waits for it and returns how many callbacks ran. */
  frame(): number {
    const due = [...this.frames.values()];
    this.frames.clear();
    for (const fn of due) fn();
    return due.length;
  }
  /** Callbacks waiting for the next frame. */
  get framesWaiting(): number {
    return this.frames.size;
  }
  get socket(): FakeSocket {
    const s = this.sockets[this.sockets.length - 1];
    if (!s) throw new Error('no socket');
    return s;
  }
  setOnline(v: boolean): void {
    this.isOnline = v;
    for (const cb of [...this.onlineCbs]) cb(v);
  }
  setVisible(v: boolean): void {
    this.isVisible = v;
    for (const cb of [...this.visCbs]) cb(v);
  }
  /** Runs the timers due within ms, in time order, advancing the clock. */
  advance(ms: number): void {
    const end = this.clock + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.clock = Math.max(this.clock, due.at);
      due.fn();
    }
    this.clock = end;
  }
  /** Delays of the pending timers, relative to now. */
  pending(): number[] {
    return this.timers.map((t) => t.at - this.clock).sort((a, b) => a - b);
  }
}

/** localStorage double. */
export class MemoryStorage implements KeyValue {
  map = new Map<string, string>();
  getItem(k: string): string | null {
    return this.map.get(k) ?? null;
  }
  setItem(k: string, v: string): void {
    this.map.set(k, v);
  }
  removeItem(k: string): void {
    this.map.delete(k);
  }
}

/** A BroadcastChannel double linking the tabs of one test. */
export class FakeBus {
  private members = new Set<FakeChannel>();
  channel(): FakeChannel {
    const c = new FakeChannel(this.members);
    this.members.add(c);
    return c;
  }
}
export class FakeChannel implements TabChannel {
  posted: SyncMessage[] = [];
  private cbs = new Set<(m: SyncMessage) => void>();
  constructor(private readonly members: Set<FakeChannel>) {}
  post(msg: SyncMessage): void {
    this.posted.push(msg);
    for (const m of this.members) if (m !== this) for (const cb of m.cbs) cb(structuredClone(msg));
  }
  listen(cb: (m: SyncMessage) => void): () => void {
    this.cbs.add(cb);
    return () => this.cbs.delete(cb);
  }
  close(): void {
    this.members.delete(this);
  }
}

let n = 0;
/** Deterministic UUID-shaped ids. */
export function seqUUID(): () => string {
  return () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;
}

export function mkTask(over: Partial<Task> = {}): Task {
  return {
    id: 't1',
    conversation_id: 'c1',
    status: 'running',
    attempt: 1,
    seq: 0,
    progress: 0,
    input: 'hello',
    output: '',
    error: null,
    result_ref: null,
    created_at: '2025-01-01T00:00:00Z',
    updated_at: '2025-01-01T00:00:00Z',
    ...over,
  };
}

/**
 * The link channel of one browser's tabs (BroadcastChannel double): ordered,
 * to every other member, and asynchronous like the real one: posts wait in
 * a queue until the test calls deliver().
 */
export class FakeLinkHub {
  private queue: Array<{ from: FakeLinkBus; m: LinkMessage }> = [];
  readonly members = new Set<FakeLinkBus>();
  /** Every message posted, in order. */
  readonly log: LinkMessage[] = [];
  bus(): FakeLinkBus {
    const b = new FakeLinkBus(this);
    this.members.add(b);
    return b;
  }
  enqueue(from: FakeLinkBus, m: LinkMessage): void {
    this.log.push(m);
    this.queue.push({ from, m: structuredClone(m) });
  }
  /** Delivers every queued message, and those they cause, in order. */
  deliver(): void {
    for (let i = 0; i < 10_000 && this.queue.length; i++) {
      const { from, m } = this.queue.shift()!;
      for (const b of [...this.members]) if (b !== from) b.receive(m);
    }
  }
}
export class FakeLinkBus implements LinkBus {
  private cbs = new Set<(m: LinkMessage) => void>();
  constructor(private readonly hub: FakeLinkHub) {}
  post(m: LinkMessage): void {
    if (this.hub.members.has(this)) this.hub.enqueue(this, m);
  }
  listen(cb: (m: LinkMessage) => void): () => void {
    this.cbs.add(cb);
    return () => this.cbs.delete(cb);
  }
  close(): void {
    this.hub.members.delete(this);
  }
  receive(m: LinkMessage): void {
    for (const cb of [...this.cbs]) cb(structuredClone(m));
  }
}

/** A Web Lock double: the first to ask leads; when it releases (or its tab dies) the next waiting one does. */
export class FakeElector {
  private waiting: Array<{ onLeader: () => void; held: boolean }> = [];
  elector(): LinkElector {
    return {
      elect: (onLeader) => {
        const w = { onLeader, held: false };
        this.waiting.push(w);
        queueMicrotask(() => this.grant());
        return () => this.release(w);
      },
    };
  }
  private release(w: { held: boolean }): void {
    this.waiting = this.waiting.filter((x) => x !== w);
    this.grant();
  }
  /** Gives the lock to the first waiting when nobody holds it. */
  grant(): void {
    const first = this.waiting[0];
    if (first && !first.held) {
      first.held = true;
      first.onLeader();
    }
  }
  /** The holder's tab died: the browser frees its lock. */
  killHolder(): void {
    const h = this.waiting[0];
    if (h?.held) this.release(h);
  }
}
