import { Connection, type ConnectionState } from './connection';
import { ConversationList } from './conversation-list';
import type { ConversationItem } from './conversations';
import { Emitter } from './emitter';
import { TetherError } from './errors';
import { Following } from './following';
import { apiRequest, browserFetch, type FetchLike } from './http';
import { HttpLink } from './httplink';
import { Liveness } from './liveness';
import { noticeOf, type Notice } from './notice';
import type { ClientOptions } from './options';
import { OtherTabs } from './othertabs';
import { browserPlatform, sameOriginWsUrl, type Platform } from './platform';
import { Limits, Paths, type Attachment, type Conversation, type ConversationChangedEvent } from './protocol';
import { ConversationSearch, type SearchState } from './search';
import { Pointers, type KeyValue } from './storage';
import { Submits } from './submits';
import { Subscriptions } from './subscription';
import { browserTabChannel, type TabChannel } from './tabsync';
import { newTaskState, TaskStates } from './tasks';
import { Thread } from './thread';
import { browserSharing, SharedConnection, type SocketLink } from './shared';
import { Transport } from './transport';
import { randomUUID } from './uuid';
import type { TaskState } from './view';
import { ViewModel, type ConversationView } from './viewmodel';

export type { ConversationView } from './viewmodel';
export type { SearchState } from './search';
export type { Notice } from './notice';
export type { ClientOptions } from './options';

export interface ClientEvents extends Record<string, unknown> {
  connection: ConnectionState;
  conversations: ConversationItem[];
  /** The open conversation, at most once an animation frame (see ViewModel). */
  view: ConversationView;
  search: SearchState;
  /** Something the user should be told once (a refused submit, a failed cancel). */
  notice: Notice;
}

/**
 * Tether's browser client: a connection that survives everything short of the
 * server's own death, tasks that re-attach after a reload, submits that are
 * idempotent on an id made and stored here before anything is sent, and a
 * conversation view that never loses text.
 *
 * It is the composition root: it makes the parts, each with its own events,
 * and wires them together. The connection (Transport over Connection and
 * HttpLink) and the per-task Subscriptions carry the wire; Thread is the open
 * conversation and its history pages, ConversationList and
 * ConversationSearch the sidebar, TaskStates what is known of each task,
 * Submits the writes, Following what the followed tasks' news means,
 * OtherTabs what the other tabs did, and ViewModel turns it all into one
 * view a frame.
 *
 * Usage: `const c = new TetherClient(); c.events.on('view', render); await c.start();`
 */
export class TetherClient {
  readonly events = new Emitter<ClientEvents>();
  /** The way to the server: the WebSocket, or the HTTP fallback when a WebSocket cannot be had. */
  readonly connection: Transport;
  /** The WebSocket side: this tab's own Connection, or the browser's one socket shared by its tabs (SharedConnection). */
  readonly websocket: SocketLink;
  readonly http: HttpLink;
  readonly subscriptions: Subscriptions;
  readonly pointers: Pointers;
  private readonly platform: Platform;
  private readonly channel: TabChannel | null;
  private readonly uuid: () => string;
  private readonly fetch: FetchLike;
  private readonly tasks: TaskStates;
  private readonly thread: Thread;
  private readonly list: ConversationList;
  private readonly finder: ConversationSearch;
  private readonly submits: Submits;
  private readonly following: Following;
  private readonly otherTabs: OtherTabs;
  private readonly liveness: Liveness;
  private readonly model: ViewModel;
  private readonly unlisten: Array<() => void> = [];
  private opens = 0;
  private unlistenForever: (() => void) | null = null;
  private started = false;

  constructor(opts: ClientOptions = {}) {
    this.platform = opts.platform ?? browserPlatform();
    const storage = opts.storage === undefined ? defaultStorage() : opts.storage;
    this.pointers = new Pointers(storage);
    this.channel = opts.channel === undefined ? browserTabChannel(storage) : opts.channel;
    this.uuid = opts.uuid ?? randomUUID;
    this.fetch = opts.fetch ?? browserFetch();
    const pageSize = Math.min(Math.max(opts.pageSize ?? Limits.defaultPage, 1), Limits.maxPage);
    const connect = () =>
      new Connection({
        url: opts.url ?? (() => sameOriginWsUrl(Paths.ws)),
        platform: this.platform,
        backoff: opts.backoff,
        pingIntervalMs: opts.pingIntervalMs,
        pingTimeoutMs: opts.pingTimeoutMs,
        connectTimeoutMs: opts.connectTimeoutMs ?? 10_000,
        beforeRetry: opts.beforeRetry,
      });
    // One socket per browser where the tabs can elect a leader and talk to it; else one per tab.
    const sharing = opts.sharing !== undefined ? opts.sharing : opts.platform === undefined ? browserSharing() : null;
    if (sharing) {
      const shared = new SharedConnection({ tab: opts.tabId ?? this.uuid(), bus: sharing.bus, elector: sharing.elector, connect, platform: this.platform });
      if (sharing.onLeave) this.unlistenForever = sharing.onLeave(() => shared.leave());
      this.websocket = shared;
    } else {
      this.websocket = connect();
    }
    this.http = new HttpLink({ fetch: this.fetch, platform: this.platform, backoff: opts.backoff });
    this.connection = new Transport({
      connection: this.websocket,
      http: this.http,
      platform: this.platform,
      fetch: this.fetch,
      maxQueued: opts.maxQueued,
      fallbackAfter: opts.fallbackAfter,
      pollMs: opts.pollMs,
    });
    this.subscriptions = new Subscriptions(this.connection);
    this.liveness = new Liveness(this.connection, this.subscriptions, opts);
    this.thread = new Thread(this.connection, this.pointers, pageSize);
    this.list = new ConversationList(this.connection, pageSize);
    this.finder = new ConversationSearch(this.connection, pageSize);
    this.tasks = new TaskStates(Math.max(opts.maxTasks ?? 500, 1), () => this.neededTasks());
    this.model = new ViewModel(this.thread, this.tasks, this.platform);
    const parts = { conn: this.connection, subscriptions: this.subscriptions, pointers: this.pointers, tasks: this.tasks, thread: this.thread, list: this.list, platform: this.platform };
    this.submits = new Submits({ ...parts, channel: this.channel, uuid: this.uuid, busy: () => this.model.build().busy });
    this.following = new Following({
      ...parts,
      submits: this.submits,
      resubscribeDelayMs: opts.resubscribeDelayMs ?? 2000,
      maxSubscribeRetries: opts.maxSubscribeRetries ?? 8,
    });
    this.otherTabs = new OtherTabs(this.tasks, this.submits, this.subscriptions);
    this.wire();
  }

  // ---- lifecycle ------------------------------------------------------------

  /**
   * Connects and restores what the stored pointers name: the open
   * conversation (newest history page), the task the tab waited for and any
   * submit not yet confirmed. Resolves once the newest history page is in.
   * conversationId, when given (the page's URL names one), is opened in
   * place of the stored one.
   */
  async start(conversationId?: string): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.channel) this.unlisten.push(this.channel.listen((m) => this.otherTabs.receive(m)));
    this.connection.start();
    await this.restore(conversationId);
  }

  /** Closes the connection and the tab channel. */
  stop(): void {
    for (const u of this.unlisten.splice(0)) u();
    this.connection.stop();
    this.unlistenForever?.();
    this.unlistenForever = null;
    this.channel?.close();
    this.model.stop();
    this.started = false;
  }

  private async restore(conversationId?: string): Promise<void> {
    const stored = this.pointers.conversation();
    this.thread.show(conversationId ?? stored ?? this.uuid(), false);
    const active = this.pointers.active();
    const pending = this.pointers.pending();
    // Show unconfirmed submits of this conversation at once, as the tab did before the reload.
    for (const p of pending) this.submits.show(p, true);
    // Every stored task id is looked up; restore.ts decides what to do with each answer (see Following).
    const ids = new Set<string>();
    if (active) ids.add(active.task_id);
    for (const p of pending) ids.add(p.task_id);
    for (const id of ids) {
      if (!this.tasks.has(id)) {
        const convOf = active?.task_id === id ? active.conversation_id : pending.find((p) => p.task_id === id)!.conversation_id;
        this.tasks.set(newTaskState(id, convOf));
      }
      this.subscriptions.follow(id);
    }
    this.model.invalidate();
    this.list.load();
    await this.thread.loadNewest();
    // A URL that named nothing of this user's must not become what `/` opens
    // next time (a send there would go into another user's conversation):
    // the stored pointer stays as it was, or names a new chat.
    if (conversationId !== undefined && this.thread.id === conversationId && this.thread.missing) this.pointers.setConversation(stored ?? this.uuid());
  }

  // ---- reads ----------------------------------------------------------------

  get state(): ConnectionState {
    return this.connection.state;
  }

  get conversationId(): string {
    return this.thread.id;
  }

  /**
   * Whether the open conversation is not on the server for this user and has
   * nothing sent from here (true only once its history was asked for): a
   * URL that names it shows "not found".
   */
  get conversationMissing(): boolean {
    return this.thread.loaded && this.thread.missing;
  }

  get conversations(): ConversationItem[] {
    return this.list.items;
  }

  /** Whether older conversations remain to be loaded. */
  get hasOlderConversations(): boolean {
    return this.list.hasMore;
  }

  /** The tab's knowledge of a task (for tests and advanced UIs). */
  taskState(id: string): TaskState | undefined {
    return this.tasks.get(id);
  }

  /** The open conversation as it is now (the `view` event brings it once a frame). */
  view(): ConversationView {
    return this.model.build();
  }

  /** The current search of the user's conversations. */
  get search(): SearchState {
    return this.finder.state;
  }

  // ---- conversations --------------------------------------------------------

  /** Opens a conversation: its newest history page, then older ones on demand. */
  async openConversation(id: string): Promise<void> {
    if (id === this.thread.id && this.thread.loaded) return;
    this.thread.show(id, false);
    for (const p of this.pointers.pending()) this.submits.show(p, true);
    await this.thread.loadNewest();
  }

  /** Starts an empty conversation with a fresh id; it exists on the server from its first submit. */
  newConversation(): string {
    const id = this.uuid();
    this.thread.show(id, true);
    return id;
  }

  /** Loads the page of history before the oldest one shown. */
  loadOlder(): Promise<void> {
    return this.thread.loadOlder();
  }

  /** Loads the next page of the conversation list. */
  loadMoreConversations(): Promise<void> {
    return this.list.loadMore();
  }

  /**
   * Renames a conversation (HTTP PATCH); every tab of the user hears of it
   * from the server, this one at once.
   */
  async renameConversation(id: string, title: string): Promise<void> {
    const t = title.trim();
    if (t === '') throw new Error('a title cannot be empty');
    const r = await apiRequest(this.fetch, 'PATCH', `${Paths.conversations}/${encodeURIComponent(id)}`, { title: t });
    this.onConversationEvent({ type: 'conversation', action: 'renamed', conversation: r.body as Conversation });
  }

  /**
   * Deletes a conversation (HTTP DELETE): its answers in progress are
   * cancelled and its messages, tasks and files removed. Every tab hears of
   * it; a tab that had it open moves to a new conversation.
   */
  async deleteConversation(id: string): Promise<void> {
    await apiRequest(this.fetch, 'DELETE', `${Paths.conversations}/${encodeURIComponent(id)}`);
    this.onConversationEvent({ type: 'conversation', action: 'deleted', conversation_id: id });
  }

  /**
   * Searches the user's conversations by title and message text; '' ends
   * the search. A newer query makes the answers of older ones moot.
   */
  searchConversations(q: string): Promise<void> {
    return this.finder.search(q);
  }

  /** The next page of the current search's results. */
  loadMoreSearch(): Promise<void> {
    return this.finder.more();
  }

  // ---- writes ---------------------------------------------------------------

  /**
   * Submits content to a conversation (default: the open one) and returns the
   * new task id. The id is made here, and the pointers (conversation, active
   * task, the submit itself) are stored before anything is sent; the user
   * message and an assistant placeholder show at once. If the connection is
   * down the submit waits for it, and after any reconnect it is sent again
   * with the same id until the server confirms it. attachments are finished
   * uploads (see Uploads) that the message carries, in order; with at least
   * one, the text may be empty (a message of files alone).
   */
  submit(content: string, conversationId: string = this.thread.id, attachments: Attachment[] = [], place: { version_of?: string } = {}): string {
    return this.submits.submit(content, conversationId, attachments, place);
  }

  /**
   * Asks the server to cancel a task. Idempotent: cancelling a finished task
   * changes nothing. Waits for the connection if it is down.
   */
  cancel(taskId: string): Promise<void> {
    return this.submits.cancel(taskId);
  }

  /**
   * Submits a failed task again with the same id, conversation and content:
   * the server starts a new attempt of the same task.
   */
  retry(taskId: string): void {
    this.submits.retry(taskId);
  }

  /** Generates an answer again, as a new version of its turn, with the turn's files; the earlier one stays. Returns the new task id. */
  regenerate(taskId: string): string {
    return this.submits.regenerate(taskId);
  }

  /** Sends an edited message as a new version of its turn, with the turn's files (or those given); the earlier one stays. Returns the new task id. */
  editAndResend(taskId: string, content: string, attachments?: Attachment[]): string {
    return this.submits.editAndResend(taskId, content, attachments);
  }

  /** Shows another version of a turn (and, after it, the newest path of what follows it). */
  showVersion(taskId: string): void {
    this.thread.showVersion(taskId);
  }

  // ---- wiring ---------------------------------------------------------------

  private wire(): void {
    const conn = this.connection;
    conn.events.on('state', (s) => this.events.emit('connection', s));
    conn.events.on('open', () => {
      // After a reconnect, events of the gap may be lost for good (task events
      // carry no seq): the newest history page and the list make up for them.
      if (this.opens++ > 0) {
        void this.thread.loadNewest();
        this.list.load();
      }
    });
    // Over the HTTP fallback nothing is pushed but the followed tasks' events:
    // read what another device may have started.
    conn.events.on('poll', () => {
      this.list.load();
      void this.thread.loadNewest();
    });
    conn.events.on('message', (m) => {
      if (m.type === 'task') this.following.onTaskEvent(m);
      else if (m.type === 'conversation') this.onConversationEvent(m);
      else if (m.type === 'error') this.events.emit('notice', noticeOf('error', '', new TetherError(m.code, m.message)));
    });
    // Whatever the open conversation shows changed: one view on the next frame.
    this.thread.events.on('change', () => this.model.invalidate());
    this.tasks.events.on('change', ({ conversation_id }) => {
      if (conversation_id === this.thread.id) this.model.invalidate();
    });
    this.model.events.on('view', (v) => {
      this.liveness.update();
      this.events.emit('view', v);
      this.following.shown();
    });
    this.list.events.on('change', (l) => this.events.emit('conversations', l));
    this.finder.events.on('change', (s) => this.events.emit('search', s));
    const notice = (n: Notice) => this.events.emit('notice', n);
    for (const part of [this.thread, this.list, this.submits, this.following]) part.events.on('notice', notice);
    this.submits.events.on('cancelled', (task) => this.following.settled(task));
  }

  /** A conversation was renamed or deleted: here, in another tab, or on another device. */
  private onConversationEvent(ev: ConversationChangedEvent): void {
    this.list.apply(ev);
    this.finder.apply(ev);
    if (ev.action === 'deleted' && ev.conversation_id === this.thread.id) {
      // The conversation shown is gone: start a new one rather than show what no longer exists.
      for (const [id, s] of this.tasks.all) if (s.conversation_id === ev.conversation_id) this.subscriptions.unfollow(id);
      this.newConversation();
      this.events.emit('notice', noticeOf('info', 'This conversation was deleted.'));
    }
  }

  /** A test of the tasks something still needs: followed, shown, named by a stored pointer or waiting to be shown. */
  private neededTasks(): (id: string) => boolean {
    const shown = new Set(this.thread.messages.map((m) => m.task_id));
    const active = this.pointers.active()?.task_id;
    const pending = new Set(this.pointers.pending().map((p) => p.task_id));
    return (id) => !!this.subscriptions.get(id) || shown.has(id) || id === active || pending.has(id) || this.following.waitsToBeShown(id);
  }
}

function defaultStorage(): KeyValue | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null; // access denied (some private modes)
  }
}
