import { Backoff, defaultBackoff, type BackoffOptions } from './backoff';
import type { ConnectionEvents, ConnectionState, ReplyHandler } from './connection';
import { Emitter } from './emitter';
import { NotConnectedError, TetherError } from './errors';
import { apiRequest, type FetchLike } from './http';
import type { Platform, TimerHandle } from './platform';
import { isTerminal, Paths, type ClientMessage, type ServerMessage, type StreamEvent, type Task } from './protocol';
import { SseParser } from './sse';

export interface HttpLinkOptions {
  fetch: FetchLike;
  platform: Platform;
  backoff?: BackoffOptions;
}

/**
 * The fallback transport: the same requests and replies as the WebSocket,
 * carried over HTTP (PROTOCOL.md section 5) when a WebSocket cannot be had.
 * submit, cancel, history and conversations are plain requests whose answers
 * become the replies the WebSocket would have sent; following a task is a
 * Server-Sent Events stream (GET /v1/tasks/{id}/events) read with fetch, its
 * events handed on exactly as WebSocket frames are, so the subscriptions
 * apply them with the same (attempt, seq) rule. A stream that breaks resumes
 * with Last-Event-ID (the seq of the last event delivered); where the server
 * cannot trust that id it sends a fresh snapshot, which is handed on as an
 * unsolicited snapshot, and a 204 says the task had finished with what was
 * delivered. Any request that gets no answer takes the link down
 * (reconnecting, with backoff) until a probe gets one again; its open event
 * then re-attaches every subscription with a fresh snapshot.
 */
export class HttpLink {
  readonly events = new Emitter<ConnectionEvents>();
  private st: ConnectionState = { kind: 'idle' };
  private readonly streams = new Map<string, TaskStream>();
  private readonly backoff: Backoff;
  private retryTimer: TimerHandle | null = null;
  private nextReq = 1;

  constructor(private readonly opts: HttpLinkOptions) {
    this.backoff = new Backoff(opts.backoff ?? defaultBackoff, () => opts.platform.random());
  }

  get state(): ConnectionState {
    return this.st;
  }

  /** Probes the API and opens; a link known to answer (just probed) may start open. */
  start(known = false): void {
    if (this.st.kind !== 'idle') return;
    if (known) this.open();
    else this.probe();
  }

  /** Closes every stream; requests in flight are answered NotConnectedError. */
  stop(): void {
    this.clearRetry();
    for (const s of this.streams.values()) s.close();
    this.streams.clear();
    this.setState({ kind: 'idle' });
  }

  /** The browser's network came or went: offline, nothing can be asked; online, ask at once. */
  setOnline(online: boolean): void {
    if (this.st.kind === 'idle') return;
    if (!online) {
      this.clearRetry();
      for (const s of this.streams.values()) s.close();
      this.streams.clear();
      this.setState({ kind: 'offline' });
    } else if (this.st.kind === 'offline' || this.st.kind === 'reconnecting') {
      this.clearRetry();
      this.probe();
    }
  }

  reconnectNow(): void {
    if (this.st.kind === 'reconnecting') {
      this.clearRetry();
      this.probe();
    }
  }

  /** Sends one request as HTTP; the reply (or an error reply) goes to handler. */
  send(msg: ClientMessage, handler?: ReplyHandler): void {
    if (this.st.kind !== 'open') {
      handler?.onFail(new NotConnectedError());
      return;
    }
    const req = `h${this.nextReq++}`;
    const reply = (m: ServerMessage) => {
      if (this.st.kind === 'open') handler?.onReply({ ...m, req } as ServerMessage);
      else handler?.onFail(new NotConnectedError('connection closed'));
    };
    const fail = (err: unknown) => {
      if (err instanceof TetherError) {
        reply({ type: 'error', code: err.code, message: err.message });
        return;
      }
      handler?.onFail(err instanceof Error ? err : new NotConnectedError(String(err)));
      if (err instanceof NotConnectedError) this.down();
    };
    void this.dispatch(msg, reply).catch(fail);
  }

  private async dispatch(msg: ClientMessage, reply: (m: ServerMessage) => void): Promise<void> {
    const f = this.opts.fetch;
    switch (msg.type) {
      case 'submit': {
        const { type: _t, req: _r, ...body } = msg;
        const r = await apiRequest(f, 'POST', Paths.tasks, body);
        const task = r.body as Task;
        reply({ type: 'submitted', created: r.status === 201, task });
        // As on a WebSocket, the submitter follows the task from its seq on.
        this.follow(task.id, task.seq, null);
        return;
      }
      case 'subscribe':
        await new Promise<void>((resolve, reject) => {
          this.follow(msg.task_id, null, {
            snapshot: (task) => {
              reply({ type: 'snapshot', task });
              resolve();
            },
            error: reject,
          });
        });
        return;
      case 'unsubscribe':
        this.streams.get(msg.task_id)?.close();
        this.streams.delete(msg.task_id);
        reply({ type: 'unsubscribed', task_id: msg.task_id });
        return;
      case 'cancel': {
        const r = await apiRequest(f, 'POST', `${Paths.tasks}/${encodeURIComponent(msg.task_id)}/cancel`);
        reply({ type: 'cancelled', task: r.body as Task });
        return;
      }
      case 'history': {
        const q = query({ before: msg.before, limit: msg.limit });
        const r = await apiRequest(f, 'GET', `${Paths.conversations}/${encodeURIComponent(msg.conversation_id)}/messages${q}`);
        const b = r.body as { messages: never[]; next: string | null };
        reply({ type: 'history', messages: b.messages, next: b.next });
        return;
      }
      case 'conversations': {
        const q = query({ before: msg.before, limit: msg.limit, q: msg.q });
        const r = await apiRequest(f, 'GET', `${Paths.conversations}${q}`);
        const b = r.body as { conversations: never[]; next: string | null };
        reply({ type: 'conversations', conversations: b.conversations, next: b.next });
        return;
      }
      case 'ping':
        await apiRequest(f, 'GET', `${Paths.conversations}?limit=1`);
        reply({ type: 'pong' });
        return;
    }
  }

  /**
   * Follows a task over SSE: from seq `after` (a submit's task) or from a
   * snapshot (a subscribe, whose first event is handed to first).
   */
  private follow(id: string, after: number | null, first: { snapshot(t: Task): void; error(err: unknown): void } | null): void {
    this.streams.get(id)?.close();
    const s = new TaskStream(id, after, this.opts, {
      snapshot: (task) => {
        if (first) {
          const f = first;
          first = null;
          f.snapshot(task);
          return;
        }
        this.events.emit('message', { type: 'snapshot', task });
      },
      event: (ev) => this.events.emit('message', ev),
      failed: (err) => {
        this.streams.delete(id);
        if (first) {
          const f = first;
          first = null;
          f.error(err);
          return;
        }
        if (err instanceof NotConnectedError) this.down();
      },
      ended: () => {
        if (this.streams.get(id) === s) this.streams.delete(id);
      },
    });
    this.streams.set(id, s);
    s.start();
  }

  private probe(): void {
    this.setState({ kind: 'connecting', retry: this.backoff.immediateUsed });
    apiRequest(this.opts.fetch, 'GET', `${Paths.conversations}?limit=1`).then(
      () => this.open(),
      (err) => (err instanceof TetherError && err.code !== 'unavailable' ? this.open() : this.down()),
    );
  }

  private open(): void {
    if (this.st.kind === 'open') return;
    this.backoff.reset();
    this.setState({ kind: 'open', transport: 'http' });
    this.events.emit('open', undefined);
  }

  /** A request got no answer: every stream goes, and a probe decides when the link is back. */
  private down(): void {
    if (this.st.kind !== 'open' && this.st.kind !== 'connecting') return;
    for (const s of this.streams.values()) s.close();
    this.streams.clear();
    const delayMs = this.backoff.next();
    const retryAt = this.opts.platform.now() + delayMs;
    this.setState({ kind: 'reconnecting', delayMs, retryAt, reason: 'the server does not answer', code: 0 });
    this.clearRetry();
    this.retryTimer = this.opts.platform.setTimeout(() => {
      this.retryTimer = null;
      this.probe();
    }, delayMs);
  }

  private clearRetry(): void {
    if (this.retryTimer !== null) this.opts.platform.clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private setState(s: ConnectionState): void {
    this.st = s;
    this.events.emit('state', s);
  }
}

function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

interface StreamSink {
  snapshot(t: Task): void;
  event(ev: StreamEvent): void;
  /** The stream cannot go on: an error answer (TetherError) or no answer (NotConnectedError). */
  failed(err: unknown): void;
  /** The task finished (its terminal event, or a 204). */
  ended(): void;
}

/** Resumes of one broken stream before it gives up and takes the link down. */
const maxResumes = 3;

/** One task's SSE stream, resumed with Last-Event-ID when it breaks. */
class TaskStream {
  private ctrl: AbortController | null = null;
  private closed = false;
  private resumes = 0;
  private lastSeq: number | null;
  private done = false;

  constructor(
    private readonly id: string,
    after: number | null,
    private readonly opts: HttpLinkOptions,
    private readonly sink: StreamSink,
  ) {
    this.lastSeq = after;
  }

  start(): void {
    void this.run();
  }

  close(): void {
    this.closed = true;
    this.ctrl?.abort();
  }

  private async run(): Promise<void> {
    while (!this.closed && !this.done) {
      this.ctrl = new AbortController();
      let res: Response;
      try {
        res = await this.opts.fetch(`${Paths.tasks}/${encodeURIComponent(this.id)}/events`, {
          headers: { Accept: 'text/event-stream', ...(this.lastSeq !== null ? { 'Last-Event-ID': String(this.lastSeq) } : {}) },
          signal: this.ctrl.signal,
        });
      } catch (err) {
        if (this.closed) return;
        if (await this.again()) continue;
        this.sink.failed(new NotConnectedError(err instanceof Error ? err.message : String(err)));
        return;
      }
      if (res.status === 204) {
        // A resume at or past the terminal event: everything was delivered.
        this.finish();
        return;
      }
      if (!res.ok || !res.body) {
        let code = 'internal';
        let message = `the server answered ${res.status}`;
        try {
          const e = ((await res.json()) as { error?: { code?: string; message?: string } }).error;
          code = e?.code ?? code;
          message = e?.message ?? message;
        } catch {
          /* not JSON */
        }
        if (code === 'unavailable' || res.status === 502 || res.status === 504) {
          if (await this.again()) continue;
          this.sink.failed(new NotConnectedError(message));
          return;
        }
        this.sink.failed(new TetherError(code as never, message));
        return;
      }
      this.resumes = 0;
      const ended = await this.read(res.body);
      if (this.closed) return;
      if (this.done) return;
      if (!ended && !(await this.again())) {
        this.sink.failed(new NotConnectedError('the event stream broke'));
        return;
      }
      // A stream the server closed before a terminal event: resume it.
    }
  }

  /** Reads events until the stream ends (true) or breaks (false). */
  private async read(body: ReadableStream<Uint8Array>): Promise<boolean> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return true;
        for (const ev of parser.push(decoder.decode(value, { stream: true }))) {
          if (this.closed) return true;
          this.deliver(ev.event, ev.data, ev.id);
          if (this.done) {
            void reader.cancel().catch(() => undefined);
            return true;
          }
        }
      }
    } catch {
      return false;
    }
  }

  private deliver(event: string, data: string, id: string | null): void {
    let m: { type?: string; task?: Task } & Partial<StreamEvent>;
    try {
      m = JSON.parse(data) as typeof m;
    } catch {
      return;
    }
    const seq = id !== null && /^\d+$/.test(id) ? Number(id) : null;
    if (event === 'snapshot' && m.task) {
      this.lastSeq = m.task.seq;
      this.sink.snapshot(m.task);
      if (isTerminal(m.task.status)) this.finish();
      return;
    }
    if (event === 'error') {
      this.sink.failed(new TetherError(((m as { code?: string }).code ?? 'internal') as never, (m as { message?: string }).message ?? ''));
      this.closed = true;
      return;
    }
    if (m.type === 'delta' || m.type === 'progress' || m.type === 'status') {
      if (seq !== null) this.lastSeq = seq;
      this.sink.event(m as StreamEvent);
      if (m.type === 'status' && isTerminal(m.status!)) this.finish();
    }
  }

  private finish(): void {
    this.done = true;
    this.sink.ended();
  }

  /** Waits before a resume; false once the resumes are spent. */
  private async again(): Promise<boolean> {
    if (this.closed || ++this.resumes > maxResumes) return false;
    const ms = 500 * 2 ** (this.resumes - 1);
    await new Promise<void>((r) => this.opts.platform.setTimeout(r, ms));
    return !this.closed;
  }
}
