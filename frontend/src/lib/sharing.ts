import type { ConnectionState } from './connection';
import type { ClientMessage, ServerMessage } from './protocol';

/**
 * The pure decisions of one socket per browser (see shared.ts): what the
 * leader tab does with a tab's request on the shared socket, which tabs
 * follow which task there, and what a tab does when it hears from a leader.
 */

/**
 * What the tabs of one browser say to one another on the link channel. The
 * leader holds the WebSocket; every other tab (a follower) sends its client
 * messages to it as `req` and gets `reply`/`fail` back, addressed to it by
 * tab id and its own request number, so two tabs' requests never mix.
 */
export type LinkMessage =
  /** A tab started (or came back): the leader says its state again. */
  | { t: 'hello'; from: string }
  /** The leader's connection state; every follower mirrors it. */
  | { t: 'state'; from: string; state: ConnectionState }
  /** A follower's client message for the shared socket; `id` is the follower's own request number. */
  | { t: 'req'; from: string; to: string; id: number; msg: ClientMessage }
  /** The server's direct reply to a follower's request. */
  | { t: 'reply'; to: string; id: number; msg: ServerMessage }
  /** A follower's request will not be answered (the socket closed first). */
  | { t: 'fail'; to: string; id: number; reason: string }
  /** A server message that is no request's reply (events, `task`, `conversation`, errors): for every tab. */
  | { t: 'msg'; from: string; msg: ServerMessage }
  /** A tab is going (closed, reloaded, stopped): the leader drops what only it followed. */
  | { t: 'bye'; from: string }
  /** A follower asks the leader to skip its backoff (it became visible, the user pressed retry). */
  | { t: 'reconnect'; from: string }
  /** How often a tab wants the socket proved alive (faster while it streams an answer). */
  | { t: 'liveness'; from: string; intervalMs: number; timeoutMs: number };

/** Whether v is a LinkMessage (the channel is the origin's; anything else on it is ignored). */
export function isLinkMessage(v: unknown): v is LinkMessage {
  if (!v || typeof v !== 'object') return false;
  const m = v as Record<string, unknown>;
  switch (m.t) {
    case 'hello':
    case 'bye':
    case 'reconnect':
      return typeof m.from === 'string';
    case 'state':
      return typeof m.from === 'string' && !!m.state && typeof (m.state as { kind?: unknown }).kind === 'string';
    case 'req':
      return typeof m.from === 'string' && typeof m.to === 'string' && typeof m.id === 'number' && !!m.msg && typeof m.msg === 'object';
    case 'reply':
      return typeof m.to === 'string' && typeof m.id === 'number' && !!m.msg && typeof m.msg === 'object';
    case 'fail':
      return typeof m.to === 'string' && typeof m.id === 'number';
    case 'msg':
      return typeof m.from === 'string' && !!m.msg && typeof m.msg === 'object';
    case 'liveness':
      return typeof m.from === 'string' && typeof m.intervalMs === 'number' && typeof m.timeoutMs === 'number';
    default:
      return false;
  }
}

/**
 * Which tabs follow each task on the shared socket. The server keeps one
 * subscription per task per socket; a tab's unsubscribe may end it only
 * when no other tab still follows the task.
 */
export class Interest {
  private readonly byTask = new Map<string, Set<string>>();

  add(task: string, tab: string): void {
    let tabs = this.byTask.get(task);
    if (!tabs) this.byTask.set(task, (tabs = new Set()));
    tabs.add(tab);
  }

  /** tab no longer follows task; true when no tab does (the socket must unsubscribe). */
  remove(task: string, tab: string): boolean {
    const tabs = this.byTask.get(task);
    if (!tabs) return true;
    tabs.delete(tab);
    if (tabs.size > 0) return false;
    this.byTask.delete(task);
    return true;
  }

  /** A tab went away: the tasks it alone followed (to unsubscribe). */
  dropTab(tab: string): string[] {
    const orphaned: string[] = [];
    for (const [task, tabs] of this.byTask) {
      if (!tabs.delete(tab) || tabs.size > 0) continue;
      this.byTask.delete(task);
      orphaned.push(task);
    }
    return orphaned;
  }

  /** The socket closed: the server forgot every subscription (each tab subscribes again on the next open). */
  clear(): void {
    this.byTask.clear();
  }

  tabs(task: string): string[] {
    return [...(this.byTask.get(task) ?? [])];
  }
}

/** What the leader does with a tab's request: send it on the socket, or answer it itself. */
export type RequestPlan = { kind: 'forward' } | { kind: 'answer'; reply: ServerMessage };

/**
 * Plans a tab's request on the shared socket and records the interest it
 * implies: a subscribe or a submit makes the tab follow the task; an
 * unsubscribe goes to the server only from the last tab that follows it,
 * and is answered here for the others, so one tab never ends another's
 * stream.
 */
export function planRequest(interest: Interest, tab: string, msg: ClientMessage): RequestPlan {
  switch (msg.type) {
    case 'subscribe':
    case 'submit':
      interest.add(msg.task_id, tab);
      return { kind: 'forward' };
    case 'unsubscribe':
      if (interest.remove(msg.task_id, tab)) return { kind: 'forward' };
      return { kind: 'answer', reply: { type: 'unsubscribed', task_id: msg.task_id } as ServerMessage };
    default:
      return { kind: 'forward' };
  }
}

/**
 * The server refused a tab's subscribe or submit: the socket holds no
 * subscription for that tab's sake (another tab's may remain).
 */
export function refused(interest: Interest, tab: string, msg: ClientMessage, reply: ServerMessage): void {
  if (reply.type === 'error' && (msg.type === 'subscribe' || msg.type === 'submit')) interest.remove(msg.task_id, tab);
}

/** What a follower does when it hears a leader's state. */
export interface FollowerStep {
  /** Fail every request still waiting for a reply (it went to a leader that is gone). */
  failPending: boolean;
  /** The states to show, in order (a change of leader passes through `connecting`, so subscriptions detach). */
  states: ConnectionState[];
  /** Emit `open` after them: re-subscribe every task (fresh snapshots, the resume). */
  open: boolean;
  /** Tell the new leader this tab's liveness wish. */
  greet: boolean;
}

/**
 * A follower hears `announced` from leader `from`, having shown `shown`
 * while following `known` (null: none yet). A new leader means a new socket:
 * what was asked of the old one will not be answered, and every task is
 * subscribed again once the new socket is open, each getting a fresh
 * snapshot, so a stream in progress ends exact.
 */
export function followerStep(known: string | null, from: string, shown: ConnectionState, announced: ConnectionState): FollowerStep {
  const changed = known !== from;
  const next: ConnectionState = announced.kind === 'idle' ? { kind: 'connecting', retry: true } : announced;
  const states: ConnectionState[] = [];
  let wasOpen = shown.kind === 'open';
  if (changed && wasOpen && next.kind === 'open') {
    states.push({ kind: 'connecting', retry: true });
    wasOpen = false;
  }
  states.push(next);
  return {
    failPending: changed || next.kind !== 'open',
    states,
    open: next.kind === 'open' && !wasOpen,
    greet: changed,
  };
}

/** The liveness the shared socket needs: the most demanding of every tab's wish (0 intervals mean pings off). */
export function strictestLiveness(wishes: Iterable<{ intervalMs: number; timeoutMs: number }>): { intervalMs: number; timeoutMs: number } | null {
  let best: { intervalMs: number; timeoutMs: number } | null = null;
  for (const w of wishes) {
    if (!best) {
      best = { ...w };
      continue;
    }
    if (w.intervalMs > 0 && (best.intervalMs <= 0 || w.intervalMs < best.intervalMs)) best.intervalMs = w.intervalMs;
    if (w.timeoutMs < best.timeoutMs) best.timeoutMs = w.timeoutMs;
  }
  return best;
}
