import type { ConversationList } from './conversation-list';
import { titleFrom } from './conversations';
import { Emitter } from './emitter';
import { noticeOf, type Notice } from './notice';
import type { Platform } from './platform';
import { Limits, type Attachment, type Task } from './protocol';
import type { PendingSubmit } from './restore';
import type { Pointers } from './storage';
import type { Subscriptions } from './subscription';
import type { TabChannel } from './tabsync';
import { newTaskState, type TaskStates } from './tasks';
import type { Thread } from './thread';
import type { Transport } from './transport';

export interface SubmitsEvents extends Record<string, unknown> {
  notice: Notice;
  /** The server answered a cancel with the task as it now is. */
  cancelled: Task;
}

/** What the writes act on: the parts of the client they change. */
export interface SubmitsParts {
  conn: Pick<Transport, 'request'>;
  subscriptions: Subscriptions;
  pointers: Pointers;
  channel: TabChannel | null;
  tasks: TaskStates;
  thread: Thread;
  list: ConversationList;
  platform: Platform;
  uuid: () => string;
  /** Whether an answer is in progress in the open conversation. */
  busy: () => boolean;
}

/**
 * What the user sends: submits (and new versions of a turn), retries and
 * cancels. A submit's id is made here and the submit stored before anything
 * is sent, its messages show at once, the other tabs hear of it, and the
 * subscription sends it (again after every reconnect, same id) until the
 * server confirms it.
 */
export class Submits {
  readonly events = new Emitter<SubmitsEvents>();

  constructor(private readonly p: SubmitsParts) {}

  /**
   * Submits content to a conversation and returns the new task id (see
   * TetherClient.submit). A message may be its files alone: blank text with
   * at least one attachment is sent as the empty text.
   */
  submit(content: string, conversationId: string, attachments: Attachment[] = [], place: { version_of?: string } = {}): string {
    const { thread, tasks } = this.p;
    if (content.trim() === '') {
      if (attachments.length === 0) throw new Error('empty message');
      content = '';
    }
    if (new TextEncoder().encode(content).length > Limits.maxContentBytes) {
      throw new Error(`message longer than ${Limits.maxContentBytes} bytes`);
    }
    if (conversationId === thread.id && this.p.busy()) {
      throw new Error('an answer is still being generated in this conversation');
    }
    const id = this.p.uuid();
    const where = thread.place(id, conversationId, place.version_of);
    const submit: PendingSubmit = { task_id: id, conversation_id: conversationId, content, ...(attachments.length ? { attachments } : {}), ...where };
    this.p.pointers.recordSubmit(submit);
    tasks.set({ ...newTaskState(id, conversationId), content, sending: true });
    this.show(submit, false);
    this.p.channel?.post({ kind: 'submit', ...submit });
    this.p.subscriptions.follow(id, submit);
    return id;
  }

  /**
   * Generates an answer again, as a new version of its turn; the earlier one
   * stays. The new turn sends the same text and the same files (the uploads
   * are the turn's, which its conversation may send again). Returns the new
   * task id.
   */
  regenerate(taskId: string): string {
    const { content, attachments } = this.turnInput(taskId);
    if (content === undefined || (content === '' && attachments.length === 0)) throw new Error('nothing to regenerate');
    return this.submit(content, this.p.thread.id, attachments, { version_of: taskId });
  }

  /**
   * Sends an edited message as a new version of its turn; the earlier one
   * stays. It keeps the turn's files unless attachments says which to send
   * (a subset the user kept). Returns the new task id.
   */
  editAndResend(taskId: string, content: string, attachments?: Attachment[]): string {
    return this.submit(content, this.p.thread.id, attachments ?? this.turnInput(taskId).attachments, { version_of: taskId });
  }

  /** What a turn's user message sent: its text and its files. */
  private turnInput(taskId: string): { content: string | undefined; attachments: Attachment[] } {
    const msg = this.p.thread.userMessage(taskId);
    const s = this.p.tasks.get(taskId);
    return { content: msg?.content ?? s?.content, attachments: msg?.attachments ?? s?.attachments ?? [] };
  }

  /** Asks the server to cancel a task; idempotent, and it waits for the connection if it is down. */
  async cancel(taskId: string): Promise<void> {
    const { tasks } = this.p;
    const s = tasks.get(taskId);
    if (s) {
      s.cancelling = true;
      tasks.changed(s);
    }
    this.p.channel?.post({ kind: 'cancel', task_id: taskId });
    try {
      const r = await this.p.conn.request({ type: 'cancel', task_id: taskId }, { wait: true });
      if (r.type !== 'cancelled') return;
      if (r.task.status === 'done' || r.task.status === 'failed') {
        // The stop reached the server after the answer ended (it was pressed
        // offline, or as the last words came): say so rather than show a
        // finished answer as if the stop had been ignored.
        const st = tasks.get(taskId);
        if (st) st.finishedFirst = true;
        this.notice(r.task.status === 'done' ? 'The answer finished before it could be stopped.' : 'The answer had already failed before it could be stopped.');
      }
      this.events.emit('cancelled', r.task);
      tasks.changed(tasks.get(taskId));
    } catch (err) {
      const st = tasks.get(taskId);
      if (st) {
        st.cancelling = false;
        tasks.changed(st);
      }
      this.events.emit('notice', noticeOf('error', 'Could not stop the answer.', err));
    }
  }

  /** Submits a failed task again with the same id, conversation, content and files: a new attempt of the same task. */
  retry(taskId: string): void {
    const { tasks, thread } = this.p;
    const s = tasks.get(taskId);
    const userMsg = thread.userMessage(taskId);
    const content = s?.content ?? userMsg?.content ?? s?.task?.input;
    const conv = s?.conversation_id ?? userMsg?.conversation_id ?? thread.id;
    // The same attachments, or the server would see another submit (conflict).
    const attachments = s?.attachments ?? userMsg?.attachments ?? [];
    if (content === undefined || (content === '' && attachments.length === 0)) throw new Error('nothing to retry');
    const submit: PendingSubmit = { task_id: taskId, conversation_id: conv, content, ...(attachments.length ? { attachments } : {}) };
    this.p.pointers.recordSubmit(submit);
    const st = s ?? newTaskState(taskId, conv);
    st.content = content;
    st.sending = true;
    st.localError = undefined;
    st.cancelling = false;
    st.task = undefined;
    tasks.set(st);
    this.p.list.touch(conv, titleFrom(content, attachments[0]?.name), taskId, nowISO(this.p.platform));
    tasks.changed(st);
    this.p.channel?.post({ kind: 'retry', ...submit });
    this.p.subscriptions.follow(taskId, submit);
  }

  /**
   * Shows a submit not confirmed yet: its messages, if its conversation is
   * open, and its conversation on top of the list, running. fromStore: it
   * was read back from storage (a reload), and a list that already shows it
   * running is left as it is.
   */
  show(p: PendingSubmit, fromStore: boolean): void {
    const { tasks, list } = this.p;
    if (!tasks.has(p.task_id)) tasks.set({ ...newTaskState(p.task_id, p.conversation_id), content: p.content, sending: true });
    const st = tasks.get(p.task_id);
    if (st && p.attachments?.length) st.attachments = p.attachments;
    const now = nowISO(this.p.platform);
    this.p.thread.addLocal(p, now);
    const existing = list.find(p.conversation_id);
    if (!fromStore || !existing || existing.active_task_id !== p.task_id) {
      list.touch(p.conversation_id, existing?.title || titleFrom(p.content, p.attachments?.[0]?.name), p.task_id, now);
    }
    tasks.changed(st);
  }

  private notice(text: string): void {
    this.events.emit('notice', noticeOf('info', text));
  }
}

function nowISO(p: Platform): string {
  return new Date(p.now()).toISOString();
}
