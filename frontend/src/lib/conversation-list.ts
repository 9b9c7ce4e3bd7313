import { applyConversationEvent, applyTask, mergeFirstPage, mergeOlderPage, touchLocal, type ConversationItem } from './conversations';
import { Emitter } from './emitter';
import { noticeOf, type Notice } from './notice';
import type { ConversationChangedEvent, TaskInfo } from './protocol';
import type { Transport } from './transport';

export interface ConversationListEvents extends Record<string, unknown> {
  change: ConversationItem[];
  notice: Notice;
}

/**
 * The user's conversations as the sidebar lists them, newest first: the
 * first page (read again after every reconnect, as task events of the gap
 * carry no seq), older pages on demand, and what this tab and the server's
 * events say moved in between. The merges are the pure functions of
 * conversations.ts; this keeps the list and says when it changed.
 */
export class ConversationList {
  readonly events = new Emitter<ConversationListEvents>();
  private list: ConversationItem[] = [];
  private cursor: string | null = null;
  private loaded = false;

  constructor(
    private readonly conn: Pick<Transport, 'request'>,
    private readonly pageSize: number,
  ) {}

  get items(): ConversationItem[] {
    return this.list;
  }

  /** Whether older conversations remain to be loaded. */
  get hasMore(): boolean {
    return this.cursor !== null;
  }

  find(id: string): ConversationItem | undefined {
    return this.list.find((c) => c.id === id);
  }

  /** Reads the first page again and merges it in. */
  load(): void {
    this.conn.request({ type: 'conversations', limit: this.pageSize }, { wait: true }).then(
      (r) => {
        if (r.type !== 'conversations') return;
        this.list = mergeFirstPage(this.list, r.conversations);
        if (!this.loaded) this.cursor = r.next;
        this.loaded = true;
        this.events.emit('change', this.list);
      },
      (err) => this.events.emit('notice', noticeOf('error', 'Could not load conversations.', err)),
    );
  }

  /** Loads the next page. */
  async loadMore(): Promise<void> {
    if (this.cursor === null) return;
    try {
      const r = await this.conn.request({ type: 'conversations', before: this.cursor, limit: this.pageSize }, { wait: true });
      if (r.type !== 'conversations') return;
      this.set(mergeOlderPage(this.list, r.conversations));
      this.cursor = r.next;
    } catch (err) {
      this.events.emit('notice', noticeOf('error', 'Could not load conversations.', err));
    }
  }

  /**
   * A task of a conversation changed: its running mark follows the status
   * and the conversation moves to the top. False when it is not listed.
   * onlyIfRunningChanged leaves the list alone unless the running mark moves.
   */
  applyTask(t: TaskInfo, onlyIfRunningChanged = false): boolean {
    const r = applyTask(this.list, t);
    if (!r.known) return false;
    if (onlyIfRunningChanged && r.list[0]!.active_task_id === this.find(t.conversation_id)?.active_task_id) return true;
    this.set(r.list);
    return true;
  }

  /** Puts a conversation at the top with a running task, as a submit here does before any reply. */
  touch(id: string, title: string, taskId: string, now: string): void {
    this.set(touchLocal(this.list, id, title, taskId, now));
  }

  /** A conversation was renamed or deleted. */
  apply(ev: ConversationChangedEvent): void {
    const list = applyConversationEvent(this.list, ev);
    if (list !== this.list) this.set(list);
  }

  private set(list: ConversationItem[]): void {
    this.list = list;
    this.events.emit('change', list);
  }
}
