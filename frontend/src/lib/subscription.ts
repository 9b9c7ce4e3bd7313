import type { ConnectionEvents, ConnectionState, ReplyHandler, SendOptions } from './connection';
import { Emitter } from './emitter';
import { NotConnectedError, TetherError } from './errors';
import type { PendingSubmit } from './restore';
import { applySnapshot, applyStreamEvent } from './stream';
import { isTerminal, type ClientMessage, type ServerMessage, type StreamEvent, type Task } from './protocol';

/** What the subscriptions need of the way to the server: a Connection, or the Transport over it and the HTTP fallback. */
export interface Link {
  readonly events: Emitter<ConnectionEvents>;
  readonly state: ConnectionState;
  send(msg: ClientMessage, handler?: ReplyHandler, opts?: SendOptions): void;
}

/**
 * A task subscription's state:
 * - unsubscribed: not attached on this connection (closed, or not found);
 * - subscribing: a subscribe (or a submit) was sent and its snapshot is awaited;
 * - subscribed: the snapshot arrived; events after it are applied in seq order.
 */
export type SubscriptionState = 'unsubscribed' | 'subscribing' | 'subscribed';

/** One followed task. */
export interface TaskSubscription {
  readonly id: string;
  state: SubscriptionState;
  /** The task as last known: snapshot plus the events applied since. */
  task: Task | undefined;
  /**
   * A submit the server has not confirmed. While it is set, every (re)connect
   * sends this submit (same id, same content) instead of a subscribe: its
   * `submitted` reply is the snapshot, and a subscribe would only say
   * not_found.
   */
  submit: PendingSubmit | undefined;
  /** Counts requests, so only the latest one's reply moves the state. */
  generation: number;
}

export interface SubscriptionEvents extends Record<string, unknown> {
  /** A subscription changed state; `reason` says why (for logs and tests). */
  state: { id: string; state: SubscriptionState; reason: string };
  /** The task view changed (a snapshot, or an applied event). */
  update: { id: string; task: Task; cause: 'snapshot' | 'submitted' | 'event' };
  /** The server confirmed a submit. */
  submitted: { id: string; task: Task; created: boolean };
  /** subscribe answered not_found; the subscription was dropped. */
  not_found: { id: string };
  /** The server refused a submit or subscribe (any code but not_found). */
  error: { id: string; error: TetherError; during: 'submit' | 'subscribe' };
  /** A gap in seq was found; a fresh snapshot was requested. */
  gap: { id: string; have: number; got: number };
  /**
   * A newer attempt started on the live stream (emitted before its `update`):
   * `keep` > 0 means it continues the answer of a lost runner from that many
   * bytes; 0 means it starts over (a retry, or an engine that cannot continue).
   */
  attempt: { id: string; attempt: number; keep: number };
}

/**
 * The per-task subscriptions of one tab. It keeps every followed task attached
 * across reconnects (each open sends subscribe, or the unconfirmed submit,
 * again), applies stream events in (attempt, seq) order, ignores repeats,
 * drops events of older attempts (stale runners), and on a gap asks for a
 * fresh snapshot instead of skipping.
 *
 * Replies are handled synchronously while their frame is read, so events that
 * share the frame with a snapshot are applied after it, never dropped.
 */
export class Subscriptions {
  readonly events = new Emitter<SubscriptionEvents>();
  private readonly subs = new Map<string, TaskSubscription>();

  constructor(private readonly conn: Link) {
    conn.events.on('open', () => this.attachAll());
    conn.events.on('state', (s) => {
      if (s.kind !== 'open') this.detachAll();
    });
    conn.events.on('message', (m) => this.handle(m));
  }

  get(id: string): TaskSubscription | undefined {
    return this.subs.get(id);
  }

  ids(): string[] {
    return [...this.subs.keys()];
  }

  /**
   * Follows a task. With submit, the task is (re)submitted with that exact
   * id and content, and again after every reconnect until the server confirms
   * it. Following a task already followed changes nothing (unless a submit is
   * given, which is then sent).
   */
  follow(id: string, submit?: PendingSubmit, known?: Task): TaskSubscription {
    let sub = this.subs.get(id);
    if (!sub) {
      sub = { id, state: 'unsubscribed', task: known, submit, generation: 0 };
      this.subs.set(id, sub);
    } else if (submit) {
      sub.submit = submit;
    } else if (sub.state !== 'unsubscribed') {
      return sub;
    }
    if (submit || sub.state === 'unsubscribed') this.attach(sub, 'follow');
    return sub;
  }

  /** Stops following; the server is told when connected. */
  unfollow(id: string): void {
    const sub = this.subs.get(id);
    if (!sub) return;
    this.subs.delete(id);
    if (sub.state !== 'unsubscribed' && this.conn.state.kind === 'open') {
      this.conn.send({ type: 'unsubscribe', task_id: id });
    }
  }

  /** Asks for a fresh snapshot (after a gap, or when a tab suspects it missed something). */
  resubscribe(id: string, reason: string): void {
    const sub = this.subs.get(id);
    if (sub) this.attach(sub, reason);
  }

  private setState(sub: TaskSubscription, state: SubscriptionState, reason: string): void {
    if (sub.state === state) return;
    sub.state = state;
    this.events.emit('state', { id: sub.id, state, reason });
  }

  private attachAll(): void {
    for (const sub of [...this.subs.values()]) this.attach(sub, 'reconnected');
  }

  private detachAll(): void {
    for (const sub of this.subs.values()) {
      sub.generation++;
      this.setState(sub, 'unsubscribed', 'disconnected');
    }
  }

  private attach(sub: TaskSubscription, reason: string): void {
    if (this.conn.state.kind !== 'open') return; // the next open attaches it
    const gen = ++sub.generation;
    this.setState(sub, 'subscribing', reason);
    const during = sub.submit ? 'submit' : 'subscribe';
    const atts = sub.submit?.attachments?.map((a) => a.id) ?? [];
    const msg = sub.submit
      ? ({
          type: 'submit',
          task_id: sub.id,
          conversation_id: sub.submit.conversation_id,
          content: sub.submit.content,
          ...(atts.length ? { attachments: atts } : {}),
          ...(sub.submit.version_of ? { version_of: sub.submit.version_of } : sub.submit.parent_task_id ? { parent_task_id: sub.submit.parent_task_id } : {}),
        } as const)
      : ({ type: 'subscribe', task_id: sub.id } as const);
    this.conn.send(msg, {
      onReply: (reply) => {
        if (this.subs.get(sub.id) !== sub || sub.generation !== gen) return;
        this.reply(sub, reply, during);
      },
      onFail: (err) => {
        if (this.subs.get(sub.id) !== sub || sub.generation !== gen) return;
        this.setState(sub, 'unsubscribed', err instanceof NotConnectedError ? 'disconnected' : err.message);
      },
    });
  }

  private reply(sub: TaskSubscription, reply: ServerMessage, during: 'submit' | 'subscribe'): void {
    switch (reply.type) {
      case 'submitted':
        sub.submit = undefined;
        sub.task = applySnapshot(sub.task, reply.task);
        this.setState(sub, 'subscribed', 'submitted');
        this.events.emit('submitted', { id: sub.id, task: sub.task, created: reply.created });
        this.events.emit('update', { id: sub.id, task: sub.task, cause: 'submitted' });
        return;
      case 'snapshot':
        sub.task = applySnapshot(sub.task, reply.task);
        this.setState(sub, 'subscribed', 'snapshot');
        this.events.emit('update', { id: sub.id, task: sub.task, cause: 'snapshot' });
        return;
      case 'error':
        this.setState(sub, 'unsubscribed', reply.code);
        if (reply.code === 'not_found' && during === 'subscribe') {
          this.subs.delete(sub.id);
          this.events.emit('not_found', { id: sub.id });
          return;
        }
        this.events.emit('error', { id: sub.id, error: new TetherError(reply.code, reply.message), during });
        return;
      default:
        this.setState(sub, 'unsubscribed', `unexpected ${reply.type} reply`);
    }
  }

  private handle(m: ServerMessage): void {
    if (m.type === 'snapshot' && !m.req) {
      this.resync(m.task);
      return;
    }
    if (m.type !== 'delta' && m.type !== 'progress' && m.type !== 'status') return;
    if (!wellFormed(m)) return; // not an event this client can order; the server never sends one
    this.apply(m);
  }

  /**
   * A snapshot the server sent unasked (it could not fill a gap from the
   * log, or an SSE resume it could not trust): events continue from its seq.
   */
  private resync(t: Task | undefined): void {
    const sub = t ? this.subs.get(t.id) : undefined;
    if (!t || !sub || sub.state !== 'subscribed') return;
    sub.task = applySnapshot(sub.task, t);
    this.events.emit('update', { id: sub.id, task: sub.task, cause: 'event' });
  }

  /** Applies one stream event to its subscription (exposed for tests through handle). */
  private apply(ev: StreamEvent): void {
    const sub = this.subs.get(ev.task_id);
    // Before the snapshot, events are covered by it: the server sends every
    // event after the snapshot's seq once the snapshot is out.
    if (!sub || sub.state !== 'subscribed' || !sub.task) return;
    const { task, outcome, started } = applyStreamEvent(sub.task, ev);
    // A repeat is already shown; a stale event (an older attempt's runner woke
    // up) is fenced out and says nothing about what this tab missed.
    if (outcome === 'repeat' || outcome === 'stale') return;
    if (outcome === 'gap') {
      this.events.emit('gap', { id: sub.id, have: sub.task.seq, got: ev.seq });
      this.attach(sub, 'gap');
      return;
    }
    sub.task = task;
    if (started) this.events.emit('attempt', { id: sub.id, ...started });
    this.events.emit('update', { id: sub.id, task, cause: 'event' });
  }
}

/**
 * The fields the ordering needs have the right types: a task id, an integer
 * seq, and an integer attempt unless it is absent (a 1.0 server's delta or
 * progress event).
 */
function wellFormed(ev: StreamEvent): boolean {
  const attempt: unknown = ev.attempt;
  return typeof ev.task_id === 'string' && Number.isSafeInteger(ev.seq) && (attempt === undefined || Number.isSafeInteger(attempt));
}

/** Whether a followed task has nothing more to stream in its current attempt. */
export function finished(sub: TaskSubscription | undefined): boolean {
  return !!sub?.task && isTerminal(sub.task.status);
}
