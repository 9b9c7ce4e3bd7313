import type { ConversationList } from './conversation-list';
import { Emitter } from './emitter';
import type { TetherError } from './errors';
import { noticeOf, type Notice } from './notice';
import type { Platform } from './platform';
import { isActive, isTerminal, type Task, type TaskChangedEvent } from './protocol';
import { clearsPointer, decideRestore, type Lookup } from './restore';
import type { Pointers } from './storage';
import { applySnapshot } from './stream';
import type { Submits } from './submits';
import type { Subscriptions } from './subscription';
import { newTaskState, type TaskStates } from './tasks';
import type { Thread } from './thread';

export interface FollowingEvents extends Record<string, unknown> {
  notice: Notice;
}

/** What following acts on. */
export interface FollowingParts {
  subscriptions: Subscriptions;
  pointers: Pointers;
  tasks: TaskStates;
  thread: Thread;
  list: ConversationList;
  submits: Submits;
  platform: Platform;
  /** Delay before the first retry of a subscribe refused for a passing reason, ms; it doubles. */
  resubscribeDelayMs: number;
  maxSubscribeRetries: number;
}

/** Submit codes that no retry of the same submit can fix. */
const permanent = new Set(['conflict', 'invalid', 'too_large', 'forbidden']);

/** Subscribe codes that no retry of the same subscribe can fix (not_found is handled as a lookup). */
const permanentSubscribe = new Set(['invalid', 'forbidden', 'unauthorized', 'conflict', 'too_large']);

/** The longest wait between retries of a refused subscribe, ms. */
const maxResubscribeDelayMs = 30_000;

/**
 * The tasks this tab follows, and what their news means here: a snapshot or
 * an event updates the task's state; the first answer about a stored task
 * id is acted on with restore.ts's decision (attach, show, re-send, forget);
 * a refused subscribe is asked again, backing off, until it is refused for
 * good; an attempt that ends stops the stream and clears the task's pointer
 * once the open conversation shows its answer. Task events of the user
 * (from other tabs and devices) attach to what starts elsewhere.
 */
export class Following {
  readonly events = new Emitter<FollowingEvents>();
  /** Refused subscribes of a task since its last snapshot. */
  private readonly failures = new Map<string, number>();
  /** Finished tasks whose pointer is cleared once the open conversation shows them. */
  private readonly clearWhenShown = new Set<string>();

  constructor(private readonly p: FollowingParts) {
    const subs = p.subscriptions;
    subs.events.on('attempt', ({ id, attempt, keep }) => {
      // Its update follows at once and shows it.
      const s = p.tasks.get(id);
      if (s) s.resumedAttempt = keep > 0 ? attempt : undefined;
    });
    subs.events.on('update', ({ id, task, cause }) => this.onUpdate(id, task, cause));
    subs.events.on('not_found', ({ id }) => this.onLookup(id, { kind: 'not_found' }));
    subs.events.on('error', ({ id, error, during }) => this.onError(id, error, during));
    p.tasks.events.on('forgotten', ({ id }) => this.failures.delete(id));
    p.thread.events.on('page', () => this.followGenerating());
    // Finished tasks of the conversation being left need no rendering here any more.
    p.thread.events.on('leave', () => {
      for (const id of this.clearWhenShown) p.pointers.clearActive(id);
      this.clearWhenShown.clear();
    });
  }

  /** Whether a task must be kept in memory for its pointer to be cleared later. */
  waitsToBeShown(id: string): boolean {
    return this.clearWhenShown.has(id);
  }

  /** The open conversation was shown: clear the pointers of the finished answers it now shows. */
  shown(): void {
    for (const id of this.clearWhenShown) {
      if (this.p.thread.shows(id)) {
        this.clearWhenShown.delete(id);
        this.p.pointers.clearActive(id);
      }
    }
  }

  /** The server's answer to a cancel: the task as it is now, for a task whose stream does not say it. */
  settled(task: Task): void {
    const s = this.p.tasks.get(task.id);
    if (!s || this.p.subscriptions.get(task.id)?.state === 'subscribed') return;
    s.task = applySnapshot(s.task, task);
    if (isTerminal(task.status)) s.cancelling = false;
    this.p.tasks.changed(s);
    if (isTerminal(task.status)) this.finish(task.id, task);
  }

  /** A task of this user was created or changed, here or on another tab or device. */
  onTaskEvent(ev: TaskChangedEvent): void {
    const { tasks, thread, subscriptions, list } = this.p;
    const t = ev.task;
    if (!list.applyTask(t)) list.load();
    const followed = subscriptions.get(t.id);
    if (isActive(t.status) && !followed) {
      // New here (another tab or device), or a retry started elsewhere: attach to it.
      if (t.conversation_id === thread.id || tasks.has(t.id)) {
        tasks.of(t.id, t.conversation_id);
        subscriptions.follow(t.id);
      }
    }
    if (t.conversation_id === thread.id) {
      // A task this tab does not show yet, or one that ended while not streamed here:
      // history has its messages (the final text is committed before the status is published).
      if (!thread.hasFromServer(t.id) || (!followed && isTerminal(t.status))) void thread.loadNewest();
    }
    if (isTerminal(t.status) && !followed) {
      const s = tasks.get(t.id);
      if (s && !s.sending) {
        s.cancelling = false;
        if (s.task && s.task.status !== t.status && t.attempt >= s.task.attempt) s.task = { ...s.task, ...t, output: s.task.output };
        tasks.changed(s);
      }
      if (t.status !== 'failed') this.p.pointers.clearActive(t.id);
    }
  }

  /** A snapshot, a confirmed submit or an applied event of a followed task. */
  private onUpdate(id: string, task: Task, cause: 'snapshot' | 'submitted' | 'event'): void {
    this.failures.delete(id);
    const s = this.p.tasks.of(id, task.conversation_id);
    s.task = task;
    s.sending = false;
    s.localError = undefined;
    if (s.content === undefined) s.content = task.input;
    if (isTerminal(task.status)) s.cancelling = false;
    if (cause === 'submitted') this.p.pointers.removePending(id);
    if (cause === 'snapshot') {
      this.onLookup(id, { kind: 'task', task });
      return;
    }
    this.p.tasks.changed(s);
    if (isTerminal(task.status)) this.finish(id, task);
    else this.p.list.applyTask(task, true);
  }

  /**
   * Acts on the server's answer about a task this tab follows, with the pure
   * decision of restore.ts: attach, show and clear, show the failure, re-send
   * the stored submit, or forget it.
   */
  private onLookup(id: string, answer: Lookup): void {
    const { pointers, tasks } = this.p;
    const action = decideRestore(pointers.pendingFor(id), answer);
    if (answer.kind === 'task') pointers.removePending(id);
    const s = tasks.get(id);
    switch (action.kind) {
      case 'attach':
        tasks.changed(s);
        this.p.list.applyTask(action.task, true);
        return;
      case 'show_done':
      case 'show_cancelled':
      case 'show_failed':
        tasks.changed(s);
        this.finish(id, action.task);
        return;
      case 'resend': {
        const st = s ?? newTaskState(id, action.submit.conversation_id);
        st.content = action.submit.content;
        st.sending = true;
        tasks.set(st);
        this.p.submits.show(action.submit, true);
        this.p.subscriptions.follow(id, action.submit);
        return;
      }
      case 'clear':
        if (clearsPointer(action)) pointers.clearActive(id);
        tasks.delete(id);
        this.p.thread.dropLocal(id);
        return;
    }
  }

  /**
   * A task's attempt ended: stop streaming it and clear its pointer unless a
   * retry is still wanted. In the open conversation the pointer goes only
   * once the answer has been shown (history may not have brought its
   * messages yet), so a reload in between still finds it.
   */
  private finish(id: string, task: Task): void {
    const { thread } = this.p;
    this.p.subscriptions.unfollow(id);
    if (task.status !== 'failed') {
      if (task.conversation_id === thread.id && !thread.shows(id)) this.clearWhenShown.add(id);
      else this.p.pointers.clearActive(id);
    }
    // An answer too large for the snapshot (result_ref, empty output) is whole
    // in its history message: make sure the page shown has it.
    if (task.result_ref && task.output === '' && task.conversation_id === thread.id) void thread.loadNewest();
    this.p.list.applyTask(task);
  }

  private onError(id: string, error: TetherError, during: 'submit' | 'subscribe'): void {
    const { tasks, subscriptions, pointers } = this.p;
    const s = tasks.get(id);
    if (during === 'subscribe') {
      const failures = (this.failures.get(id) ?? 0) + 1;
      if (!permanentSubscribe.has(error.code) && failures <= this.p.maxSubscribeRetries) {
        // A passing refusal (rate_limited, unavailable): ask again later, backing off.
        this.failures.set(id, failures);
        const delay = Math.min(this.p.resubscribeDelayMs * 2 ** (failures - 1), maxResubscribeDelayMs);
        this.p.platform.setTimeout(() => subscriptions.resubscribe(id, 'retry after error'), delay);
        return;
      }
      // A refusal no retry fixes, or one that kept coming: stop asking and say so.
      this.failures.delete(id);
      subscriptions.unfollow(id);
      if (s) {
        s.localError = { code: error.code, message: error.message, retryable: !permanentSubscribe.has(error.code) };
        tasks.changed(s);
      }
      this.events.emit('notice', noticeOf('error', 'Could not follow an answer.', error));
      return;
    }
    subscriptions.unfollow(id);
    const retryable = !permanent.has(error.code);
    if (!retryable) {
      pointers.removePending(id);
      pointers.clearActive(id);
    }
    if (s) {
      s.sending = false;
      s.localError = { code: error.code, message: error.message, retryable };
      tasks.changed(s);
    }
    this.events.emit('notice', noticeOf('error', 'The message was not sent.', error));
  }

  /** Attaches to every answer the open conversation shows as generating that this tab does not follow yet. */
  private followGenerating(): void {
    const { tasks, subscriptions } = this.p;
    for (const m of this.p.thread.messages) {
      if (m.role !== 'assistant' || m.local || m.status !== 'generating' || !m.task_id) continue;
      const s = tasks.get(m.task_id);
      if (subscriptions.get(m.task_id) || (s?.task && isTerminal(s.task.status))) continue;
      tasks.of(m.task_id, m.conversation_id);
      subscriptions.follow(m.task_id);
    }
  }
}
