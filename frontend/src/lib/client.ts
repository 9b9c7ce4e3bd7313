import type { BackoffOptions } from './backoff';
import { Connection, type ConnectionState } from './connection';
import { HttpLink } from './httplink';
import { Transport } from './transport';
import { applyConversationEvent, applyTask, mergeFirstPage, mergeOlderPage, titleFrom, touchLocal, type ConversationItem } from './conversations';
import { apiRequest, browserFetch, type FetchLike } from './http';
import { Emitter } from './emitter';
import { describeError } from './errortext';
import { NotConnectedError, TetherError } from './errors';
import { addLocal, localPair, mergeNewest, mergeOlder, type ChatMessage } from './history';
import { browserPlatform, sameOriginWsUrl, type Platform } from './platform';
import { isActive, isTerminal, Limits, Paths, type Attachment, type Conversation, type ConversationChangedEvent, type Task, type TaskChangedEvent } from './protocol';
import { clearsPointer, decideRestore, type Lookup, type PendingSubmit } from './restore';
import { placement, Pointers, type KeyValue } from './storage';
import { Subscriptions } from './subscription';
import { browserTabChannel, type SyncMessage, type TabChannel } from './tabsync';
import { randomUUID } from './uuid';
import { buildMessages, showPath, type TaskState, type ViewMessage } from './view';
import { leafAndNewest, parentKeyOf } from './versions';
import { applySnapshot } from './stream';

export interface ClientOptions {
  /** WebSocket URL; default `/v1/ws` on the page's origin. A function is called before every connect. */
  url?: string | (() => string);
  platform?: Platform;
  /** Where pointers live; default localStorage. null keeps them in memory. */
  storage?: KeyValue | null;
  /** Channel to the other tabs; default BroadcastChannel (storage event fallback). null: none. */
  channel?: TabChannel | null;
  /** Makes task and conversation ids; default crypto.randomUUID. */
  uuid?: () => string;
  /** History page size (1..200); default 50. */
  pageSize?: number;
  backoff?: BackoffOptions;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** Ping period and pong timeout while a followed answer streams; default 5 s and 3 s. */
  streamingPingIntervalMs?: number;
  streamingPingTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** See ConnectionOptions.beforeRetry. */
  beforeRetry?: () => Promise<void>;
  /**
   * Delay before the first retry of a subscribe the server refused for a
   * passing reason (rate_limited, unavailable), ms; it doubles with each
   * failure, up to 30 s.
   */
  resubscribeDelayMs?: number;
  /** Retries of one refused subscribe before the tab gives up and shows why; default 8. */
  maxSubscribeRetries?: number;
  /**
   * Tasks the tab remembers; beyond it, finished tasks that the open
   * conversation does not show are forgotten (history has them). Default 500.
   */
  maxTasks?: number;
  /** Requests that may wait for the connection (see ConnectionOptions.maxQueued); default 256. */
  maxQueued?: number;
  /** The HTTP API's fetch (renames, deletes, the fallback); default the browser's on this origin. */
  fetch?: FetchLike;
  /** Failed WebSocket upgrades in a row, while HTTP answers, before the HTTP fallback; default 2. */
  fallbackAfter?: number;
  /** How often the HTTP fallback reads what a WebSocket would have pushed, ms; default 10 s. */
  pollMs?: number;
}

/** A search of the user's conversations, as the sidebar shows it. */
export interface SearchState {
  q: string;
  results: Conversation[];
  loading: boolean;
  /** More results remain on the server. */
  hasMore: boolean;
  error: string | null;
}

/** The open conversation, ready to render. */
export interface ConversationView {
  id: string;
  messages: ViewMessage[];
  /** The newest page has arrived (or the conversation is known to be empty). */
  loaded: boolean;
  /** Older pages remain on the server. */
  hasOlder: boolean;
  loadingOlder: boolean;
  /** A task in it is pending or running: the UI must not offer to send. */
  busy: boolean;
  /** Why history could not be loaded, if it could not. */
  error: string | null;
}

export interface ClientEvents extends Record<string, unknown> {
  connection: ConnectionState;
  conversations: ConversationItem[];
  view: ConversationView;
  search: SearchState;
  /** Something the user should be told once (a refused submit, a failed cancel). */
  notice: { level: 'info' | 'error'; text: string; detail?: string | null };
}

/** Submit codes that no retry of the same submit can fix. */
const permanent = new Set(['conflict', 'invalid', 'too_large', 'forbidden']);

/** Subscribe codes that no retry of the same subscribe can fix (not_found is handled as a lookup). */
const permanentSubscribe = new Set(['invalid', 'forbidden', 'unauthorized', 'conflict', 'too_large']);

/** The longest wait between retries of a refused subscribe, ms. */
const maxResubscribeDelayMs = 30_000;

/**
 * Tether's browser client: a connection that survives everything short of the
 * server's own death, tasks that re-attach after a reload, submits that are
 * idempotent on an id made and stored here before anything is sent, and a
 * conversation view that never loses text.
 *
 * Usage: `const c = new TetherClient(); c.events.on('view', render); await c.start();`
 */
export class TetherClient {
  readonly events = new Emitter<ClientEvents>();
  /** The way to the server: the WebSocket, or the HTTP fallback when a WebSocket cannot be had. */
  readonly connection: Transport;
  readonly websocket: Connection;
  readonly http: HttpLink;
  readonly subscriptions: Subscriptions;
  readonly pointers: Pointers;
  private readonly platform: Platform;
  private readonly channel: TabChannel | null;
  private readonly uuid: () => string;
  private readonly pageSize: number;
  private readonly resubscribeDelayMs: number;
  private readonly maxSubscribeRetries: number;
  private readonly maxTasks: number;
  private readonly tasks = new Map<string, TaskState>();
  /** Refused subscribes of a task since its last snapshot. */
  private readonly subscribeFailures = new Map<string, number>();
  private readonly unlisten: Array<() => void> = [];
  /** Finished tasks whose pointer is cleared once the open conversation shows them. */
  private readonly clearWhenShown = new Set<string>();

  private convId = '';
  private messages: ChatMessage[] = [];
  private loaded = false;
  private olderCursor: string | null = null;
  private hasOlder = false;
  private loadingOlder = false;
  private historyError: string | null = null;
  private historyGen = 0;

  private readonly idlePing: { intervalMs: number; timeoutMs: number };
  private readonly streamingPing: { intervalMs: number; timeoutMs: number };

  /** The version chosen at each turn of the open conversation (by the turn it follows); the newest elsewhere. */
  private chosen = new Map<string, string>();
  private convList: ConversationItem[] = [];
  private convCursor: string | null = null;
  private convListLoaded = false;
  private opens = 0;
  private started = false;
  private readonly fetch: FetchLike;
  private searchState: SearchState = { q: '', results: [], loading: false, hasMore: false, error: null };
  private searchCursor: string | null = null;
  private searchGen = 0;

  constructor(opts: ClientOptions = {}) {
    this.platform = opts.platform ?? browserPlatform();
    const storage = opts.storage === undefined ? defaultStorage() : opts.storage;
    this.pointers = new Pointers(storage);
    this.channel = opts.channel === undefined ? browserTabChannel(storage) : opts.channel;
    this.uuid = opts.uuid ?? randomUUID;
    this.fetch = opts.fetch ?? browserFetch();
    this.pageSize = Math.min(Math.max(opts.pageSize ?? Limits.defaultPage, 1), Limits.maxPage);
    this.resubscribeDelayMs = opts.resubscribeDelayMs ?? 2000;
    this.maxSubscribeRetries = opts.maxSubscribeRetries ?? 8;
    this.maxTasks = Math.max(opts.maxTasks ?? 500, 1);
    this.idlePing = { intervalMs: opts.pingIntervalMs ?? 25_000, timeoutMs: opts.pingTimeoutMs ?? 10_000 };
    this.streamingPing = {
      // Pings off (0) stay off.
      intervalMs: this.idlePing.intervalMs <= 0 ? 0 : Math.min(opts.streamingPingIntervalMs ?? 5_000, this.idlePing.intervalMs),
      timeoutMs: Math.min(opts.streamingPingTimeoutMs ?? 3_000, this.idlePing.timeoutMs),
    };
    this.websocket = new Connection({
      url: opts.url ?? (() => sameOriginWsUrl(Paths.ws)),
      platform: this.platform,
      backoff: opts.backoff,
      pingIntervalMs: opts.pingIntervalMs,
      pingTimeoutMs: opts.pingTimeoutMs,
      connectTimeoutMs: opts.connectTimeoutMs ?? 10_000,
      beforeRetry: opts.beforeRetry,
    });
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
    this.wire();
  }

  // ---- lifecycle ------------------------------------------------------------

  /**
   * Connects and restores what the stored pointers name: the open
   * conversation (newest history page), the task the tab waited for and any
   * submit not yet confirmed. Resolves once the newest history page is in.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.channel) this.unlisten.push(this.channel.listen((m) => this.onSync(m)));
    this.connection.start();
    await this.restore();
  }

  /** Closes the connection and the tab channel. */
  stop(): void {
    for (const u of this.unlisten.splice(0)) u();
    this.connection.stop();
    this.channel?.close();
    this.started = false;
  }

  private async restore(): Promise<void> {
    let conv = this.pointers.conversation();
    if (!conv) {
      conv = this.uuid();
      this.pointers.setConversation(conv);
    }
    this.convId = conv;
    const active = this.pointers.active();
    const pending = this.pointers.pending();
    // Show unconfirmed submits of this conversation at once, as the tab did before the reload.
    for (const p of pending) this.rememberSubmit(p, true);
    // Every stored task id is looked up; decideRestore acts on each answer (see onSnapshot / onNotFound).
    const ids = new Set<string>();
    if (active) ids.add(active.task_id);
    for (const p of pending) ids.add(p.task_id);
    for (const id of ids) {
      if (!this.tasks.has(id)) {
        const convOf = active?.task_id === id ? active.conversation_id : pending.find((p) => p.task_id === id)!.conversation_id;
        this.setTask(id, newState(id, convOf));
      }
      this.subscriptions.follow(id);
    }
    this.emitView();
    this.loadConversations();
    await this.loadNewest();
  }

  // ---- reads ----------------------------------------------------------------

  get state(): ConnectionState {
    return this.connection.state;
  }

  get conversationId(): string {
    return this.convId;
  }

  get conversations(): ConversationItem[] {
    return this.convList;
  }

  /** Whether older conversations remain to be loaded. */
  get hasOlderConversations(): boolean {
    return this.convCursor !== null;
  }

  /** The tab's knowledge of a task (for tests and advanced UIs). */
  taskState(id: string): TaskState | undefined {
    return this.tasks.get(id);
  }

  view(): ConversationView {
    const all = buildMessages(this.messages, this.tasks);
    const messages = showPath(all, this.chosen);
    return {
      id: this.convId,
      messages,
      loaded: this.loaded,
      hasOlder: this.hasOlder,
      loadingOlder: this.loadingOlder,
      // Any answer in progress, on the path shown or on another version's.
      busy: all.some((m) => m.status === 'generating'),
      error: this.historyError,
    };
  }

  // ---- conversations --------------------------------------------------------

  /** Opens a conversation: its newest history page, then older ones on demand. */
  async openConversation(id: string): Promise<void> {
    if (id === this.convId && this.loaded) return;
    this.convId = id;
    this.pointers.setConversation(id);
    this.resetHistory();
    for (const p of this.pointers.pending()) this.rememberSubmit(p, true);
    this.emitView();
    await this.loadNewest();
  }

  /** Starts an empty conversation with a fresh id; it exists on the server from its first submit. */
  newConversation(): string {
    const id = this.uuid();
    this.convId = id;
    this.pointers.setConversation(id);
    this.resetHistory();
    this.loaded = true;
    this.emitView();
    return id;
  }

  /** Loads the page of history before the oldest one shown. */
  async loadOlder(): Promise<void> {
    if (!this.hasOlder || this.loadingOlder || this.olderCursor === null) return;
    const conv = this.convId;
    const gen = this.historyGen;
    this.loadingOlder = true;
    this.emitView();
    try {
      const r = await this.connection.request({ type: 'history', conversation_id: conv, before: this.olderCursor, limit: this.pageSize }, { wait: true });
      if (gen !== this.historyGen || r.type !== 'history') return;
      this.messages = mergeOlder(this.messages, r.messages);
      this.olderCursor = r.next;
      this.hasOlder = r.next !== null;
    } catch (err) {
      if (gen === this.historyGen) this.notice('error', 'Could not load older messages.', err);
    } finally {
      if (gen === this.historyGen) {
        this.loadingOlder = false;
        this.emitView();
      }
    }
  }

  /** Loads the next page of the conversation list. */
  async loadMoreConversations(): Promise<void> {
    if (this.convCursor === null) return;
    try {
      const r = await this.connection.request({ type: 'conversations', before: this.convCursor, limit: this.pageSize }, { wait: true });
      if (r.type !== 'conversations') return;
      this.convList = mergeOlderPage(this.convList, r.conversations);
      this.convCursor = r.next;
      this.events.emit('conversations', this.convList);
    } catch (err) {
      this.notice('error', 'Could not load conversations.', err);
    }
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

  /** The current search of the user's conversations. */
  get search(): SearchState {
    return this.searchState;
  }

  /**
   * Searches the user's conversations by title and message text; '' ends
   * the search. A newer query makes the answers of older ones moot.
   */
  async searchConversations(q: string): Promise<void> {
    const gen = ++this.searchGen;
    this.searchCursor = null;
    if (q.trim() === '') {
      this.setSearch({ q: '', results: [], loading: false, hasMore: false, error: null });
      return;
    }
    this.setSearch({ ...this.searchState, q, loading: true, error: null });
    await this.fetchSearch(gen, q, undefined);
  }

  /** The next page of the current search's results. */
  async loadMoreSearch(): Promise<void> {
    const { q, loading } = this.searchState;
    if (!q || loading || this.searchCursor === null) return;
    this.setSearch({ ...this.searchState, loading: true });
    await this.fetchSearch(this.searchGen, q, this.searchCursor);
  }

  private async fetchSearch(gen: number, q: string, before: string | undefined): Promise<void> {
    try {
      const r = await this.connection.request({ type: 'conversations', q, limit: this.pageSize, ...(before ? { before } : {}) }, { wait: true });
      if (gen !== this.searchGen || r.type !== 'conversations') return;
      this.searchCursor = r.next;
      const results = before ? [...this.searchState.results, ...r.conversations.filter((c) => !this.searchState.results.some((x) => x.id === c.id))] : r.conversations;
      this.setSearch({ q, results, loading: false, hasMore: r.next !== null, error: null });
    } catch (err) {
      if (gen !== this.searchGen) return;
      const msg = err instanceof TetherError ? describeError(err.code, err.message).text : errText(err);
      this.setSearch({ ...this.searchState, loading: false, error: msg });
    }
  }

  private setSearch(s: SearchState): void {
    this.searchState = s;
    this.events.emit('search', s);
  }

  /** A conversation was renamed or deleted: here, in another tab, or on another device. */
  private onConversationEvent(ev: ConversationChangedEvent): void {
    const list = applyConversationEvent(this.convList, ev);
    if (list !== this.convList) {
      this.convList = list;
      this.events.emit('conversations', this.convList);
    }
    const results = applyConversationEvent(this.searchState.results, ev);
    if (results !== this.searchState.results) this.setSearch({ ...this.searchState, results });
    if (ev.action === 'deleted' && ev.conversation_id === this.convId) {
      // The conversation shown is gone: start a new one rather than show what no longer exists.
      for (const [id, s] of this.tasks) if (s.conversation_id === ev.conversation_id) this.subscriptions.unfollow(id);
      this.newConversation();
      this.notice('info', 'This conversation was deleted.');
    }
  }

  // ---- writes ---------------------------------------------------------------

  /**
   * Submits content to a conversation (default: the open one) and returns the
   * new task id. The id is made here, and the pointers (conversation, active
   * task, the submit itself) are stored before anything is sent; the user
   * message and an assistant placeholder show at once. If the connection is
   * down the submit waits for it, and after any reconnect it is sent again
   * with the same id until the server confirms it. attachments are finished
   * uploads (see Uploads) that the message carries, in order.
   */
  submit(content: string, conversationId: string = this.convId, attachments: Attachment[] = [], place: { version_of?: string } = {}): string {
    if (content.trim() === '') throw new Error('empty message');
    if (new TextEncoder().encode(content).length > Limits.maxContentBytes) {
      throw new Error(`message longer than ${Limits.maxContentBytes} bytes`);
    }
    if (conversationId === this.convId && this.view().busy) {
      throw new Error('an answer is still being generated in this conversation');
    }
    const id = this.uuid();
    // Where the new turn goes: another version of a turn, or after the last
    // turn shown when that is not the newest one written (the server's default).
    let where: { version_of?: string; parent_task_id?: string } = {};
    if (place.version_of) {
      where = { version_of: place.version_of };
      this.chosen.set(parentKeyOf(this.messages, place.version_of), id);
    } else if (conversationId === this.convId) {
      const { leaf, newest } = leafAndNewest(this.messages, this.chosen);
      if (leaf && leaf !== newest) where = { parent_task_id: leaf };
    }
    const submit: PendingSubmit = { task_id: id, conversation_id: conversationId, content, ...(attachments.length ? { attachments } : {}), ...where };
    this.pointers.recordSubmit(submit);
    this.setTask(id, { ...newState(id, conversationId), content, sending: true });
    this.rememberSubmit(submit, false);
    this.channel?.post({ kind: 'submit', ...submit });
    this.subscriptions.follow(id, submit);
    return id;
  }

  /**
   * Asks the server to cancel a task. Idempotent: cancelling a finished task
   * changes nothing. Waits for the connection if it is down.
   */
  async cancel(taskId: string): Promise<void> {
    const s = this.tasks.get(taskId);
    if (s) {
      s.cancelling = true;
      this.emitViewIf(s.conversation_id);
    }
    this.channel?.post({ kind: 'cancel', task_id: taskId });
    try {
      const r = await this.connection.request({ type: 'cancel', task_id: taskId }, { wait: true });
      if (r.type !== 'cancelled') return;
      if (r.task.status === 'done' || r.task.status === 'failed') {
        // The stop reached the server after the answer ended (it was pressed
        // offline, or as the last words came): say so rather than show a
        // finished answer as if the stop had been ignored.
        const st = this.tasks.get(taskId);
        if (st) st.finishedFirst = true;
        this.notice('info', r.task.status === 'done' ? 'The answer finished before it could be stopped.' : 'The answer had already failed before it could be stopped.');
      }
      this.onCancelled(r.task);
      const st = this.tasks.get(taskId);
      if (st) this.emitViewIf(st.conversation_id);
    } catch (err) {
      const st = this.tasks.get(taskId);
      if (st) {
        st.cancelling = false;
        this.emitViewIf(st.conversation_id);
      }
      this.notice('error', 'Could not stop the answer.', err);
    }
  }

  /**
   * Submits a failed task again with the same id, conversation and content:
   * the server starts a new attempt of the same task.
   */
  retry(taskId: string): void {
    const s = this.tasks.get(taskId);
    const userMsg = this.messages.find((m) => m.task_id === taskId && m.role === 'user');
    const content = s?.content ?? userMsg?.content ?? s?.task?.input;
    const conv = s?.conversation_id ?? userMsg?.conversation_id ?? this.convId;
    if (!content) throw new Error('nothing to retry');
    // The same attachments, or the server would see another submit (conflict).
    const attachments = s?.attachments ?? userMsg?.attachments ?? [];
    const submit: PendingSubmit = { task_id: taskId, conversation_id: conv, content, ...(attachments.length ? { attachments } : {}) };
    this.pointers.recordSubmit(submit);
    const st = s ?? newState(taskId, conv);
    st.content = content;
    st.sending = true;
    st.localError = undefined;
    st.cancelling = false;
    st.task = undefined;
    this.setTask(taskId, st);
    this.convList = touchLocal(this.convList, conv, titleFrom(content), taskId, nowISO(this.platform));
    this.events.emit('conversations', this.convList);
    this.emitViewIf(conv);
    this.channel?.post({ kind: 'retry', ...submit });
    this.subscriptions.follow(taskId, submit);
  }

  // ---- internals ------------------------------------------------------------

  private wire(): void {
    const conn = this.connection;
    const subs = this.subscriptions;
    conn.events.on('state', (s) => this.events.emit('connection', s));
    conn.events.on('open', () => {
      // After a reconnect, events of the gap may be lost for good (task events
      // carry no seq): the newest history page and the list make up for them.
      if (this.opens++ > 0) {
        void this.loadNewest();
        this.loadConversations();
      }
    });
    // Over the HTTP fallback nothing is pushed but the followed tasks' events:
    // read what another device may have started.
    conn.events.on('poll', () => {
      this.loadConversations();
      void this.loadNewest();
    });
    conn.events.on('message', (m) => {
      if (m.type === 'task') this.onTaskEvent(m);
      else if (m.type === 'conversation') this.onConversationEvent(m);
      else if (m.type === 'error') this.notice('error', '', new TetherError(m.code, m.message));
    });
    subs.events.on('attempt', ({ id, attempt, keep }) => {
      // Its update follows at once and renders it.
      const s = this.tasks.get(id);
      if (s) s.resumedAttempt = keep > 0 ? attempt : undefined;
    });
    subs.events.on('update', ({ id, task, cause }) => this.onUpdate(id, task, cause));
    subs.events.on('not_found', ({ id }) => this.onLookup(id, { kind: 'not_found' }));
    subs.events.on('error', ({ id, error, during }) => this.onSubError(id, error, during));
  }

  /** A snapshot, a confirmed submit or an applied event of a followed task. */
  private onUpdate(id: string, task: Task, cause: 'snapshot' | 'submitted' | 'event'): void {
    this.subscribeFailures.delete(id);
    const s = this.stateOf(id, task.conversation_id);
    s.task = task;
    s.sending = false;
    s.localError = undefined;
    if (s.content === undefined) s.content = task.input;
    if (isTerminal(task.status)) s.cancelling = false;
    if (cause === 'submitted') this.pointers.removePending(id);
    if (cause === 'snapshot') {
      this.onLookup(id, { kind: 'task', task });
      return;
    }
    this.emitViewIf(task.conversation_id);
    if (isTerminal(task.status)) this.finish(id, task);
    else this.markRunning(task);
  }

  /**
   * Acts on the server's answer about a task this tab follows, with the pure
   * decision of restore.ts: attach, show and clear, show the failure, re-send
   * the stored submit, or forget it.
   */
  private onLookup(id: string, answer: Lookup): void {
    const action = decideRestore(this.pointers.pendingFor(id), answer);
    if (answer.kind === 'task') this.pointers.removePending(id);
    const s = this.tasks.get(id);
    switch (action.kind) {
      case 'attach':
        this.emitViewIf(action.task.conversation_id);
        this.markRunning(action.task);
        return;
      case 'show_done':
      case 'show_cancelled':
      case 'show_failed':
        this.emitViewIf(action.task.conversation_id);
        this.finish(id, action.task);
        return;
      case 'resend': {
        const st = s ?? newState(id, action.submit.conversation_id);
        st.content = action.submit.content;
        st.sending = true;
        this.setTask(id, st);
        this.rememberSubmit(action.submit, true);
        this.subscriptions.follow(id, action.submit);
        return;
      }
      case 'clear':
        if (clearsPointer(action)) this.pointers.clearActive(id);
        this.tasks.delete(id);
        this.messages = this.messages.filter((m) => !(m.local && m.task_id === id));
        this.emitView();
        return;
    }
  }

  /**
   * A task's attempt ended: stop streaming it and clear its pointer unless a
   * retry is still wanted. In the open conversation the pointer goes only
   * once the answer has been rendered (history may not have brought its
   * messages yet), so a reload in between still finds it.
   */
  private finish(id: string, task: Task): void {
    this.subscriptions.unfollow(id);
    if (task.status !== 'failed') {
      if (task.conversation_id === this.convId && !this.shows(id)) this.clearWhenShown.add(id);
      else this.pointers.clearActive(id);
    }
    // An answer too large for the snapshot (result_ref, empty output) is whole
    // in its history message: make sure the page shown has it.
    if (task.result_ref && task.output === '' && task.conversation_id === this.convId) void this.loadNewest();
    const r = applyTask(this.convList, task);
    if (r.known) {
      this.convList = r.list;
      this.events.emit('conversations', this.convList);
    }
  }

  private markRunning(task: Task): void {
    const r = applyTask(this.convList, task);
    if (r.known && r.list[0]!.active_task_id !== this.convList.find((c) => c.id === task.conversation_id)?.active_task_id) {
      this.convList = r.list;
      this.events.emit('conversations', this.convList);
    }
  }

  private onSubError(id: string, error: TetherError, during: 'submit' | 'subscribe'): void {
    const s = this.tasks.get(id);
    if (during === 'subscribe') {
      const failures = (this.subscribeFailures.get(id) ?? 0) + 1;
      if (!permanentSubscribe.has(error.code) && failures <= this.maxSubscribeRetries) {
        // A passing refusal (rate_limited, unavailable): ask again later, backing off.
        this.subscribeFailures.set(id, failures);
        const delay = Math.min(this.resubscribeDelayMs * 2 ** (failures - 1), maxResubscribeDelayMs);
        this.platform.setTimeout(() => this.subscriptions.resubscribe(id, 'retry after error'), delay);
        return;
      }
      // A refusal no retry fixes, or one that kept coming: stop asking and say so.
      this.subscribeFailures.delete(id);
      this.subscriptions.unfollow(id);
      const retryable = !permanentSubscribe.has(error.code);
      if (s) {
        s.localError = { code: error.code, message: error.message, retryable };
        this.emitViewIf(s.conversation_id);
      }
      this.notice('error', 'Could not follow an answer.', error);
      return;
    }
    this.subscriptions.unfollow(id);
    const retryable = !permanent.has(error.code);
    if (!retryable) {
      this.pointers.removePending(id);
      this.pointers.clearActive(id);
    }
    if (s) {
      s.sending = false;
      s.localError = { code: error.code, message: error.message, retryable };
      this.emitViewIf(s.conversation_id);
    }
    this.notice('error', 'The message was not sent.', error);
  }

  private onCancelled(task: Task): void {
    const s = this.tasks.get(task.id);
    if (!s) return;
    if (this.subscriptions.get(task.id)?.state !== 'subscribed') {
      s.task = applySnapshot(s.task, task);
      if (isTerminal(task.status)) s.cancelling = false;
      this.emitViewIf(task.conversation_id);
      if (isTerminal(task.status)) this.finish(task.id, task);
    }
  }

  /** A task of this user was created or changed, here or on another tab or device. */
  private onTaskEvent(ev: TaskChangedEvent): void {
    const t = ev.task;
    const r = applyTask(this.convList, t);
    if (r.known) {
      this.convList = r.list;
      this.events.emit('conversations', this.convList);
    } else {
      this.loadConversations();
    }
    const followed = this.subscriptions.get(t.id);
    if (isActive(t.status) && !followed) {
      // New here (another tab or device), or a retry started elsewhere: attach to it.
      if (t.conversation_id === this.convId || this.tasks.has(t.id)) {
        this.stateOf(t.id, t.conversation_id);
        this.subscriptions.follow(t.id);
      }
    }
    if (t.conversation_id === this.convId) {
      const shown = this.messages.some((m) => m.task_id === t.id && !m.local);
      // A task this tab does not show yet, or one that ended while not streamed here:
      // history has its messages (the final text is committed before the status is published).
      if (!shown || (!followed && isTerminal(t.status))) void this.loadNewest();
    }
    if (isTerminal(t.status) && !followed) {
      const s = this.tasks.get(t.id);
      if (s && !s.sending) {
        s.cancelling = false;
        if (s.task && s.task.status !== t.status && t.attempt >= s.task.attempt) s.task = { ...s.task, ...t, output: s.task.output };
        this.emitViewIf(t.conversation_id);
      }
      if (t.status !== 'failed') this.pointers.clearActive(t.id);
    }
  }

  /** Another tab of this browser did something; show it now rather than after the server's round trip. */
  private onSync(m: SyncMessage): void {
    if (m.kind === 'cancel') {
      const s = this.tasks.get(m.task_id);
      if (s) {
        s.cancelling = true;
        this.emitViewIf(s.conversation_id);
      }
      return;
    }
    const s = this.stateOf(m.task_id, m.conversation_id);
    s.content = m.content;
    s.localError = undefined;
    if (m.kind === 'retry') s.task = undefined;
    if (!s.task) s.sending = true;
    this.rememberSubmit({ task_id: m.task_id, conversation_id: m.conversation_id, content: m.content, ...(m.attachments?.length ? { attachments: m.attachments } : {}), ...placement(m) }, true);
    // Subscribe; if it has not reached the server yet, the shared pending record makes
    // this tab send the same submit (same id), which the server deduplicates.
    const sub = this.subscriptions.get(m.task_id);
    if (sub) this.subscriptions.resubscribe(m.task_id, 'other tab');
    else this.subscriptions.follow(m.task_id);
  }

  /** Shows a submit's local echo (if its conversation is open) and marks its conversation running. */
  /** The turn a submit's turn follows, as far as this tab knows; undefined: the newest (the server's default). */
  private parentOf(p: PendingSubmit): string | null | undefined {
    if (p.version_of) {
      const target = this.messages.find((m) => m.task_id === p.version_of && !m.local) ?? this.messages.find((m) => m.task_id === p.version_of);
      return target ? (target.parent_task_id ?? null) : undefined;
    }
    return p.parent_task_id;
  }

  /** Generates an answer again, as a new version of its turn; the earlier one stays. Returns the new task id. */
  regenerate(taskId: string): string {
    const user = this.messages.find((m) => m.task_id === taskId && m.role === 'user');
    const content = user?.content ?? this.tasks.get(taskId)?.content;
    if (!content) throw new Error('nothing to regenerate');
    return this.submit(content, this.convId, [], { version_of: taskId });
  }

  /** Sends an edited message as a new version of its turn; the earlier one stays. Returns the new task id. */
  editAndResend(taskId: string, content: string): string {
    return this.submit(content, this.convId, [], { version_of: taskId });
  }

  /** Shows another version of a turn (and, after it, the newest path of what follows it). */
  showVersion(taskId: string): void {
    this.chosen.set(parentKeyOf(this.messages, taskId), taskId);
    this.emitView();
  }

  private rememberSubmit(p: PendingSubmit, fromStore: boolean): void {
    if (!this.tasks.has(p.task_id)) this.setTask(p.task_id, { ...newState(p.task_id, p.conversation_id), content: p.content, sending: true });
    const st = this.tasks.get(p.task_id);
    if (st && p.attachments?.length) st.attachments = p.attachments;
    const now = nowISO(this.platform);
    if (p.conversation_id === this.convId) {
      this.messages = addLocal(this.messages, localPair(p.task_id, p.conversation_id, p.content, now, p.attachments, this.parentOf(p)));
    }
    const existing = this.convList.find((c) => c.id === p.conversation_id);
    if (!fromStore || !existing || existing.active_task_id !== p.task_id) {
      this.convList = touchLocal(this.convList, p.conversation_id, existing?.title || titleFrom(p.content), p.task_id, now);
      this.events.emit('conversations', this.convList);
    }
    this.emitViewIf(p.conversation_id);
  }

  private stateOf(id: string, conversationId: string): TaskState {
    let s = this.tasks.get(id);
    if (!s) {
      s = newState(id, conversationId);
      this.setTask(id, s);
    }
    return s;
  }

  /** Remembers a task, keeping the map bounded (trimTasks). */
  private setTask(id: string, s: TaskState): void {
    this.tasks.set(id, s);
    if (this.tasks.size > this.maxTasks) this.trimTasks();
  }

  /**
   * Forgets the oldest tasks that nothing needs any more: finished, not
   * followed, not waiting for a submit, not named by a stored pointer, and
   * not shown by the open conversation. History has their messages.
   */
  private trimTasks(): void {
    const shown = new Set(this.messages.map((m) => m.task_id));
    const active = this.pointers.active()?.task_id;
    const pending = new Set(this.pointers.pending().map((p) => p.task_id));
    for (const [id, s] of this.tasks) {
      if (this.tasks.size <= this.maxTasks) return;
      if (s.sending || !s.task || !isTerminal(s.task.status) || this.subscriptions.get(id)) continue;
      if (shown.has(id) || id === active || pending.has(id) || this.clearWhenShown.has(id)) continue;
      this.tasks.delete(id);
      this.subscribeFailures.delete(id);
    }
  }

  private resetHistory(): void {
    // Finished tasks of the conversation being left need no rendering here any more.
    for (const id of this.clearWhenShown) this.pointers.clearActive(id);
    this.clearWhenShown.clear();
    this.historyGen++;
    this.chosen = new Map();
    this.messages = [];
    this.loaded = false;
    this.olderCursor = null;
    this.hasOlder = false;
    this.loadingOlder = false;
    this.historyError = null;
  }

  /** Loads (or refreshes) the newest history page of the open conversation. */
  private async loadNewest(): Promise<void> {
    const conv = this.convId;
    const gen = this.historyGen;
    const first = !this.loaded || this.messages.every((m) => m.local);
    try {
      const r = await this.connection.request({ type: 'history', conversation_id: conv, limit: this.pageSize }, { wait: true });
      if (gen !== this.historyGen || r.type !== 'history') return;
      const merged = mergeNewest(this.messages, r.messages);
      this.messages = merged.messages;
      if (first || merged.reset) {
        this.olderCursor = r.next;
        this.hasOlder = r.next !== null;
      }
      this.historyError = null;
    } catch (err) {
      if (gen !== this.historyGen) return;
      if (err instanceof TetherError && err.code === 'not_found') {
        // Made here and not submitted into yet (or not this user's): an empty conversation.
        this.messages = this.messages.filter((m) => m.local);
        this.hasOlder = false;
        this.olderCursor = null;
        this.historyError = null;
      } else {
        this.historyError = errText(err);
      }
    }
    this.loaded = true;
    this.followGenerating();
    this.emitView();
  }

  /** Attaches to every task the open conversation shows as generating that this tab does not follow yet. */
  private followGenerating(): void {
    for (const m of this.messages) {
      if (m.role !== 'assistant' || m.local || m.status !== 'generating' || !m.task_id) continue;
      const s = this.tasks.get(m.task_id);
      if (this.subscriptions.get(m.task_id) || (s?.task && isTerminal(s.task.status))) continue;
      this.stateOf(m.task_id, m.conversation_id);
      this.subscriptions.follow(m.task_id);
    }
  }

  private loadConversations(): void {
    this.connection.request({ type: 'conversations', limit: this.pageSize }, { wait: true }).then(
      (r) => {
        if (r.type !== 'conversations') return;
        this.convList = mergeFirstPage(this.convList, r.conversations);
        if (!this.convListLoaded) this.convCursor = r.next;
        this.convListLoaded = true;
        this.events.emit('conversations', this.convList);
      },
      (err) => this.notice('error', 'Could not load conversations.', err),
    );
  }

  private emitViewIf(conversationId: string): void {
    if (conversationId === this.convId) this.emitView();
  }

  private emitView(): void {
    this.updateLiveness();
    this.events.emit('view', this.view());
    for (const id of this.clearWhenShown) {
      if (this.shows(id)) {
        this.clearWhenShown.delete(id);
        this.pointers.clearActive(id);
      }
    }
  }

  /**
   * While an answer streams, the connection proves it is alive every few
   * seconds, so a path that died without a word (no close, no offline
   * event) shows as "reconnecting" in seconds rather than half a minute.
   */
  private updateLiveness(): void {
    const streaming = this.subscriptions.ids().some((id) => {
      const t = this.subscriptions.get(id)?.task;
      return !t || isActive(t.status);
    });
    if (streaming) this.connection.setLiveness(this.streamingPing.intervalMs, this.streamingPing.timeoutMs);
    else this.connection.setLiveness(this.idlePing.intervalMs, this.idlePing.timeoutMs);
  }

  private shows(taskId: string): boolean {
    return this.messages.some((m) => m.task_id === taskId && m.role === 'assistant');
  }

  /** Tells the user something once; an error is said in plain words by its code, with the detail kept. */
  private notice(level: 'info' | 'error', text: string, err?: unknown): void {
    if (err === undefined) {
      this.events.emit('notice', { level, text, detail: null });
      return;
    }
    const human =
      err instanceof TetherError
        ? describeError(err.code, err.message)
        : err instanceof NotConnectedError
          ? { text: 'The connection was lost; it will be tried again once it is back.', detail: err.message }
          : { text: 'Something went wrong.', detail: errText(err) };
    this.events.emit('notice', { level, text: text ? `${text} ${human.text}` : human.text, detail: human.detail });
  }
}

function newState(id: string, conversationId: string): TaskState {
  return { id, conversation_id: conversationId, content: undefined, task: undefined, sending: false, cancelling: false, localError: undefined, resumedAttempt: undefined, finishedFirst: false };
}

function defaultStorage(): KeyValue | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null; // access denied (some private modes)
  }
}

function nowISO(p: Platform): string {
  return new Date(p.now()).toISOString();
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
