import { ChosenVersions, type Placement } from './chosen';
import { Emitter } from './emitter';
import { TetherError } from './errors';
import { addLocal, localPair, mergeNewest, mergeOlder, type ChatMessage } from './history';
import { errText, noticeOf, type Notice } from './notice';
import type { PendingSubmit } from './restore';
import type { Pointers } from './storage';
import type { Transport } from './transport';

export interface ThreadEvents extends Record<string, unknown> {
  /** What the open conversation shows changed (its messages, or how far they are loaded). */
  change: { id: string };
  /** The newest page was read and merged: it may show answers in progress to follow. */
  page: { id: string };
  /** The conversation is about to be left for another. */
  leave: { id: string };
  notice: Notice;
}

/**
 * The open conversation: its messages, paged from history (the newest page
 * first and again after every reconnect, older pages on demand), the local
 * echoes of submits not yet confirmed, and the versions it shows. A page that
 * answers after the tab moved to another conversation is dropped (each
 * conversation shown has a generation). The merges are history.ts's.
 */
export class Thread {
  readonly events = new Emitter<ThreadEvents>();
  readonly versions = new ChosenVersions();
  private convId = '';
  private list: ChatMessage[] = [];
  private isLoaded = false;
  private olderCursor: string | null = null;
  private older = false;
  private loadingOlderPage = false;
  private historyError: string | null = null;
  private absent = false;
  private gen = 0;

  constructor(
    private readonly conn: Pick<Transport, 'request'>,
    private readonly pointers: Pointers,
    private readonly pageSize: number,
  ) {}

  get id(): string {
    return this.convId;
  }
  get messages(): ChatMessage[] {
    return this.list;
  }
  /** The newest page has arrived (or the conversation is known to be empty). */
  get loaded(): boolean {
    return this.isLoaded;
  }
  get hasOlder(): boolean {
    return this.older;
  }
  get loadingOlder(): boolean {
    return this.loadingOlderPage;
  }
  /**
   * The server has no such conversation of this user's and the tab has sent
   * nothing into it yet: a new chat not yet submitted into, or an id that is
   * another user's or nobody's (the server does not say which).
   */
  get missing(): boolean {
    return this.absent && this.list.length === 0;
  }
  /** Why history could not be loaded, if it could not. */
  get error(): string | null {
    return this.historyError;
  }

  /**
   * Shows conversation id from nothing: its pages are to be loaded
   * (loadNewest), or, empty, it is new and has none yet.
   */
  show(id: string, empty: boolean): void {
    if (this.convId !== '') this.events.emit('leave', { id: this.convId });
    this.gen++;
    this.convId = id;
    this.pointers.setConversation(id);
    this.versions.clear();
    this.list = [];
    this.isLoaded = empty;
    this.olderCursor = null;
    this.older = false;
    this.loadingOlderPage = false;
    this.historyError = null;
    this.absent = false;
    this.changed();
  }

  /** Loads (or refreshes) the newest history page. */
  async loadNewest(): Promise<void> {
    const conv = this.convId;
    const gen = this.gen;
    const first = !this.isLoaded || this.list.every((m) => m.local);
    try {
      const r = await this.conn.request({ type: 'history', conversation_id: conv, limit: this.pageSize }, { wait: true });
      if (gen !== this.gen || r.type !== 'history') return;
      const merged = mergeNewest(this.list, r.messages);
      this.list = merged.messages;
      if (first || merged.reset) {
        this.olderCursor = r.next;
        this.older = r.next !== null;
      }
      this.historyError = null;
      this.absent = false;
    } catch (err) {
      if (gen !== this.gen) return;
      if (err instanceof TetherError && err.code === 'not_found') {
        // Made here and not submitted into yet (or not this user's): an empty conversation.
        this.list = this.list.filter((m) => m.local);
        this.older = false;
        this.olderCursor = null;
        this.historyError = null;
        this.absent = true;
      } else {
        this.historyError = errText(err);
      }
    }
    this.isLoaded = true;
    this.events.emit('page', { id: conv });
    this.changed();
  }

  /** Loads the page of history before the oldest one shown. */
  async loadOlder(): Promise<void> {
    if (!this.older || this.loadingOlderPage || this.olderCursor === null) return;
    const conv = this.convId;
    const gen = this.gen;
    this.loadingOlderPage = true;
    this.changed();
    try {
      const r = await this.conn.request({ type: 'history', conversation_id: conv, before: this.olderCursor, limit: this.pageSize }, { wait: true });
      if (gen !== this.gen || r.type !== 'history') return;
      this.list = mergeOlder(this.list, r.messages);
      this.olderCursor = r.next;
      this.older = r.next !== null;
    } catch (err) {
      if (gen === this.gen) this.events.emit('notice', noticeOf('error', 'Could not load older messages.', err));
    } finally {
      if (gen === this.gen) {
        this.loadingOlderPage = false;
        this.changed();
      }
    }
  }

  /** Shows a submit's user message and an answer placeholder at once, if it is of this conversation. */
  addLocal(p: PendingSubmit, now: string): void {
    if (p.conversation_id !== this.convId) return;
    this.list = addLocal(this.list, localPair(p.task_id, p.conversation_id, p.content, now, p.attachments, this.parentOf(p)));
    this.changed();
  }

  /** Takes back the local echo of a task the server never had. */
  dropLocal(taskId: string): void {
    this.list = this.list.filter((m) => !(m.local && m.task_id === taskId));
    this.changed();
  }

  /** Whether the conversation shows the answer of taskId (from history or as an echo). */
  shows(taskId: string): boolean {
    return this.list.some((m) => m.task_id === taskId && m.role === 'assistant');
  }

  /** Whether history has brought a message of taskId. */
  hasFromServer(taskId: string): boolean {
    return this.list.some((m) => m.task_id === taskId && !m.local);
  }

  userMessage(taskId: string): ChatMessage | undefined {
    return this.list.find((m) => m.task_id === taskId && m.role === 'user');
  }

  /** Shows another version of a turn (and, after it, the newest path of what follows it). */
  showVersion(taskId: string): void {
    this.versions.show(this.list, taskId);
    this.changed();
  }

  /** Where a new turn id of conversationId goes; a new version of a turn here becomes the one shown. */
  place(id: string, conversationId: string, versionOf: string | undefined): Placement {
    if (!versionOf && conversationId !== this.convId) return {};
    return this.versions.place(this.list, id, versionOf);
  }

  /** The turn a submit's turn follows, as far as this tab knows; undefined: the newest (the server's default). */
  private parentOf(p: PendingSubmit): string | null | undefined {
    if (p.version_of) {
      const target = this.list.find((m) => m.task_id === p.version_of && !m.local) ?? this.list.find((m) => m.task_id === p.version_of);
      return target ? (target.parent_task_id ?? null) : undefined;
    }
    return p.parent_task_id;
  }

  private changed(): void {
    this.events.emit('change', { id: this.convId });
  }
}
