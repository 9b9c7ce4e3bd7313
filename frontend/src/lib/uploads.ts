import { Emitter } from './emitter';
import { Limits, Paths, type Attachment } from './protocol';
import type { KeyValue } from './storage';

/**
 * Attachments that survive F5 (PROTOCOL.md section 10). A file added to the
 * composer is a draft upload: its pointer (name, size, the tus upload URL
 * once the server made one, how far it got, paused or not) lives in
 * localStorage beside the task pointers, and the file itself in IndexedDB,
 * so after a reload, a lost network or in another tab the upload goes on
 * from the offset the server reports (tus HEAD), never from zero.
 *
 * One tab at a time drives an upload: it holds a Web Lock named after the
 * draft while it sends, and every other tab of the browser queues for that
 * lock, so when the driving tab is closed or reloaded, the next one carries
 * on at once. Pause and resume are stored, so every tab agrees on them.
 *
 * The library stays free of runtime dependencies: the tus client is an
 * UploadTransport that the app provides (the UI wires tus-js-client), and
 * the browser's IndexedDB and locks come through FileVault and Locks.
 */

export type UploadState = 'uploading' | 'paused' | 'done' | 'failed';

/** A file added to the composer of a conversation, as stored. */
export interface DraftUpload {
  /** Made here: the draft's id and the key of its file in the vault. */
  key: string;
  conversation_id: string;
  name: string;
  size: number;
  type: string;
  /** The tus upload's URL, once the server created it. */
  url: string | null;
  /** Bytes the server has, as last known. */
  sent: number;
  state: UploadState;
  /** Why it failed (state failed). */
  error: string | null;
  /** Failed for good: trying again cannot help (too large, a name the server refuses). */
  final?: boolean;
}

/** A draft as the UI shows it. */
export interface DraftView extends DraftUpload {
  /** The upload id (the last segment of its URL). */
  id: string | null;
  /** 0..1. */
  progress: number;
}

/** The tus protocol client: tus-js-client in the app, a fake in tests. */
export interface UploadTransport {
  /**
   * Uploads file: resumes url (HEAD, then PATCH from the reported offset)
   * or, when url is null or the server no longer knows it, creates an
   * upload at endpoint. Exactly one of onSuccess and onError is called,
   * unless the handle is aborted first.
   */
  start(file: Blob, o: TransportOptions): TransportHandle;
  /** Deletes an upload on the server (tus termination); best effort. */
  terminate(url: string): Promise<void>;
}

export interface TransportOptions {
  endpoint: string;
  url: string | null;
  metadata: Record<string, string>;
  onUrl(url: string): void;
  onProgress(sent: number, total: number): void;
  onSuccess(url: string): void;
  onError(e: TransportError): void;
}

export interface TransportError {
  /** The HTTP status of the response that failed, null for a network error. */
  status: number | null;
  message: string;
}

export interface TransportHandle {
  /** Stops sending; the server keeps what it received. */
  abort(): void;
}

/** Where files wait between page loads (IndexedDB in a browser). */
export interface FileVault {
  put(key: string, file: Blob): Promise<void>;
  get(key: string): Promise<Blob | undefined>;
  delete(key: string): Promise<void>;
}

/** Exclusive locks shared by the tabs of a browser (navigator.locks). */
export interface Locks {
  /** Runs fn while holding the lock name, waiting for it if another tab holds it. */
  request(name: string, fn: () => Promise<void>): Promise<void>;
}

/** The timers and network state an upload manager needs. */
export interface UploadPlatform {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(t: unknown): void;
  /** Calls back when the browser comes back online; returns a function that stops it. */
  onOnline(cb: () => void): () => void;
}

export const uploadsStorageKey = 'tether.v1.uploads';

// ---- pure functions ---------------------------------------------------------

/** The upload id of a tus URL: its last path segment. */
export function uploadIdOf(url: string | null): string | null {
  if (!url) return null;
  const path = url.split(/[?#]/)[0]!.replace(/\/+$/, '');
  const id = path.slice(path.lastIndexOf('/') + 1);
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) ? id.toLowerCase() : null;
}

const states: readonly UploadState[] = ['uploading', 'paused', 'done', 'failed'];

/** The stored drafts, keeping only well-formed ones. */
export function parseDrafts(raw: string | null): DraftUpload[] {
  if (!raw) return [];
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    return [];
  }
  if (!Array.isArray(list)) return [];
  return list.filter((d): d is DraftUpload => {
    if (!d || typeof d !== 'object') return false;
    const x = d as Record<string, unknown>;
    return (
      typeof x.key === 'string' &&
      typeof x.conversation_id === 'string' &&
      typeof x.name === 'string' &&
      typeof x.type === 'string' &&
      Number.isSafeInteger(x.size) &&
      Number.isSafeInteger(x.sent) &&
      (x.url === null || typeof x.url === 'string') &&
      (x.error === null || typeof x.error === 'string') &&
      (x.final === undefined || typeof x.final === 'boolean') &&
      states.includes(x.state as UploadState)
    );
  });
}

/**
 * The attachments a message of the conversation would carry, in the order
 * the files were added, if every draft is done; otherwise null (sending must
 * wait). No drafts: [].
 */
export function attachmentsOf(drafts: readonly DraftUpload[]): Attachment[] | null {
  const out: Attachment[] = [];
  for (const d of drafts) {
    const id = uploadIdOf(d.url);
    if (d.state !== 'done' || !id) return null;
    out.push({ id, name: d.name, size: d.size, type: d.type || 'application/octet-stream' });
  }
  return out;
}

/** What to do after a failed upload request. */
export type ErrorAction = 'retry' | 'restart' | 'fail';

/**
 * Decides after an error: a network error, a 5xx, 408, 409 (the offset
 * moved: HEAD tells the new one), 423 (locked by a request still ending) and
 * 429 are retried; a 404 or 410 means the server forgot the upload (it
 * expired), so it starts over as a new one; any other 4xx (too large, a bad
 * name, not allowed) fails and says why.
 */
export function errorAction(status: number | null): ErrorAction {
  if (status === null || status >= 500 || status === 408 || status === 409 || status === 423 || status === 429) return 'retry';
  if (status === 404 || status === 410) return 'restart';
  return status >= 400 ? 'fail' : 'retry';
}

/** Whether a refusal is for good: the file (its size, its name) is what the server refuses. */
export function finalRefusal(status: number | null): boolean {
  return status === 413 || status === 400;
}

/** A failed upload's message for people. */
export function uploadErrorText(e: TransportError, maxSize: number | null): string {
  switch (e.status) {
    case 413:
      return maxSize ? `Larger than the ${formatBytes(maxSize)} limit.` : 'The file is too large.';
    case 401:
    case 403:
      return 'Not allowed to upload; reload the page.';
  }
  return e.message || 'The upload failed.';
}

/** A byte count for people: 512 B, 1.5 KB, 20 MB (binary multiples, as the server counts). */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 10 || Number.isInteger(v) ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

/** Delay before the n-th retry of an upload (1-based): 1 s, 2 s, 4 s … 30 s. */
export function retryDelay(n: number): number {
  return Math.min(1000 * 2 ** (n - 1), 30_000);
}

// ---- the manager ------------------------------------------------------------

export interface UploadsOptions {
  /** localStorage, or null to keep drafts in memory (a reload forgets them). */
  storage: KeyValue | null;
  vault: FileVault;
  transport: UploadTransport;
  /** navigator.locks; null drives every wanted upload in this tab. */
  locks: Locks | null;
  platform: UploadPlatform;
  uuid: () => string;
  /** Absolute URL of the tus endpoint. */
  endpoint: string;
  /** The server's size limit, when known (Tus-Max-Size). */
  maxSize?: number | null;
  /** Calls back when another tab changed the stored drafts; returns a function that stops it. */
  listen?: (cb: () => void) => () => void;
  /** How often progress is written to storage for other tabs, ms. Default 500. */
  saveEveryMs?: number;
}

export interface UploadEvents extends Record<string, unknown> {
  /** A draft was added, progressed, changed state or went. */
  change: void;
}

type Outcome = { kind: 'done' } | { kind: 'aborted' } | { kind: 'error'; error: TransportError };

/** The draft uploads of every conversation, and the driving of them. */
export class Uploads {
  readonly events = new Emitter<UploadEvents>();
  private drafts: DraftUpload[] = [];
  private readonly memory = new Map<string, string>();
  /** Drafts this tab asked the lock for (waiting or driving). */
  private readonly wanted = new Set<string>();
  /** Drafts this tab is sending now, and how to stop them. */
  private readonly active = new Map<string, { abort(): void }>();
  /** Bytes sent, fresher than storage. */
  private readonly live = new Map<string, number>();
  /**
   * The files this tab was given (picked, dropped, pasted): it sends them
   * from memory; the vault's copies are for a reload or another tab.
   */
  private readonly files = new Map<string, Blob>();
  private saveTimer: unknown = null;
  private stopped = false;
  private readonly unlisten: Array<() => void> = [];
  private maxSize: number | null;

  constructor(private readonly o: UploadsOptions) {
    this.maxSize = o.maxSize ?? null;
  }

  /** Loads the stored drafts and carries on every upload that was under way. */
  start(): void {
    this.drafts = this.load();
    if (this.o.listen) this.unlisten.push(this.o.listen(() => this.onStorage()));
    for (const d of this.drafts) if (d.state === 'uploading') this.want(d.key);
    this.events.emit('change', undefined);
  }

  stop(): void {
    this.stopped = true;
    for (const u of this.unlisten.splice(0)) u();
    for (const a of this.active.values()) a.abort();
  }

  setMaxSize(n: number | null): void {
    this.maxSize = n;
  }

  /** The drafts of a conversation, in the order they were added. */
  list(conversationId: string): DraftView[] {
    return this.drafts
      .filter((d) => d.conversation_id === conversationId)
      .map((d) => {
        const sent = d.state === 'done' ? d.size : Math.max(d.sent, this.live.get(d.key) ?? 0);
        return { ...d, sent, id: uploadIdOf(d.url), progress: d.size > 0 ? Math.min(sent / d.size, 1) : d.state === 'done' ? 1 : 0 };
      });
  }

  /**
   * Adds files to a conversation's composer and starts uploading them.
   * Returns why some were refused (too many, too large), for the user.
   */
  add(conversationId: string, files: readonly File[]): string[] {
    const problems: string[] = [];
    let count = this.drafts.filter((d) => d.conversation_id === conversationId).length;
    const added: Array<{ d: DraftUpload; file: File }> = [];
    for (const file of files) {
      if (count >= Limits.maxAttachments) {
        problems.push(`At most ${Limits.maxAttachments} files a message: ${file.name} was not added.`);
        continue;
      }
      const tooBig = this.maxSize !== null && file.size > this.maxSize;
      const d: DraftUpload = {
        key: this.o.uuid(),
        conversation_id: conversationId,
        name: file.name,
        size: file.size,
        type: file.type,
        url: null,
        sent: 0,
        state: tooBig ? 'failed' : 'uploading',
        error: tooBig ? uploadErrorText({ status: 413, message: '' }, this.maxSize) : null,
        ...(tooBig ? { final: true } : {}),
      };
      count++;
      added.push({ d, file });
    }
    if (added.length === 0) return problems;
    this.drafts = [...this.load(), ...added.map((a) => a.d)];
    for (const { d, file } of added) {
      if (d.state !== 'uploading') continue;
      // This tab asks for the upload's lock before any other tab can learn
      // of the draft (the storage write below), so it drives the upload,
      // from the file in memory.
      this.files.set(d.key, file);
      this.want(d.key);
      // A copy for a reload or another tab; without IndexedDB (a private
      // window, a full disk) only this tab can send it.
      void this.o.vault.put(d.key, file).catch(() => undefined);
    }
    this.save();
    this.events.emit('change', undefined);
    return problems;
  }

  pause(key: string): void {
    if (!this.update(key, (d) => (d.state === 'uploading' ? { ...d, state: 'paused', sent: this.sentOf(d) } : d))) return;
    this.active.get(key)?.abort();
  }

  resume(key: string): void {
    const ok = this.update(key, (d) => (d.state === 'paused' || (d.state === 'failed' && !d.final) ? { ...d, state: 'uploading', error: null } : d));
    if (ok) this.want(key);
  }

  /** Takes a draft out of the composer; its upload is deleted on the server. */
  remove(key: string): void {
    const d = this.load().find((x) => x.key === key);
    this.active.get(key)?.abort();
    this.drafts = this.load().filter((x) => x.key !== key);
    this.save();
    this.live.delete(key);
    this.files.delete(key);
    void this.o.vault.delete(key).catch(() => undefined);
    // Not sent with a message, so nothing else will ever use it.
    if (d?.url) void this.o.transport.terminate(d.url).catch(() => undefined);
    this.events.emit('change', undefined);
  }

  /**
   * What a message sent now would attach: the conversation's drafts as
   * attachments when all are done, else null.
   */
  ready(conversationId: string): Attachment[] | null {
    return attachmentsOf(this.drafts.filter((d) => d.conversation_id === conversationId));
  }

  /**
   * Empties the conversation's composer once its message is sent: the
   * uploads now belong to that message (the caller stored its submit first,
   * with them, so no reload in between loses them).
   */
  take(conversationId: string): void {
    const keys = this.drafts.filter((d) => d.conversation_id === conversationId).map((d) => d.key);
    if (keys.length === 0) return;
    this.drafts = this.load().filter((d) => d.conversation_id !== conversationId);
    this.save();
    for (const k of keys) {
      this.live.delete(k);
      this.files.delete(k);
      void this.o.vault.delete(k).catch(() => undefined);
    }
    this.events.emit('change', undefined);
  }

  // ---- driving --------------------------------------------------------------

  /** Asks to drive an upload: at once if no tab does, else when the one that does lets go. */
  private want(key: string): void {
    if (this.wanted.has(key) || this.stopped) return;
    this.wanted.add(key);
    const run = () => this.drive(key);
    // Either way drive runs in a later task, after the caller stored the draft.
    const p = this.o.locks ? this.o.locks.request(`tether.upload.${key}`, run) : Promise.resolve().then(run);
    void p
      .catch(() => undefined)
      .finally(() => {
        this.wanted.delete(key);
        // Resumed while this tab was letting go of it: ask again.
        if (this.find(key)?.state === 'uploading') this.want(key);
      });
  }

  /** Sends one draft until it is done, paused, removed, or fails for good. */
  private async drive(key: string): Promise<void> {
    let d = this.find(key);
    if (!d || d.state !== 'uploading') return;
    const file = this.files.get(key) ?? (await this.fromVault(key));
    if (!file) {
      this.update(key, (x) => ({ ...x, state: 'failed', error: 'The file is not available here any more; add it again.', final: true }));
      return;
    }
    let failures = 0;
    for (;;) {
      d = this.find(key);
      if (!d || d.state !== 'uploading') return;
      const out = await this.send(d, file);
      if (out.kind !== 'error') return;
      const action = errorAction(out.error.status);
      if (action === 'fail') {
        this.update(key, (x) => ({ ...x, state: 'failed', error: uploadErrorText(out.error, this.maxSize), final: finalRefusal(out.error.status) }));
        return;
      }
      if (action === 'restart') this.update(key, (x) => ({ ...x, url: null, sent: 0 }));
      failures++;
      await this.wait(retryDelay(failures));
    }
  }

  /**
   * The file of a draft from the vault. A tab that just added it may still
   * be writing it there, so a missing file is looked for again a few times
   * over two seconds before it counts as lost.
   */
  private async fromVault(key: string): Promise<Blob | undefined> {
    for (let i = 0; ; i++) {
      const f = await this.o.vault.get(key).catch(() => undefined);
      if (f || i >= 8 || !this.find(key)) return f;
      await new Promise<void>((r) => this.o.platform.setTimeout(r, 250));
    }
  }

  /** One run of the transport, from wherever the server is. */
  private send(d: DraftUpload, file: Blob): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      const settle = (o: Outcome) => {
        if (settled) return;
        settled = true;
        this.active.delete(d.key);
        resolve(o);
      };
      const handle = this.o.transport.start(file, {
        endpoint: this.o.endpoint,
        url: d.url,
        metadata: { filename: d.name, filetype: d.type },
        onUrl: (url) => {
          if (!settled) this.update(d.key, (x) => (x.url === url ? x : { ...x, url }));
        },
        onProgress: (sent) => {
          if (settled) return;
          this.live.set(d.key, sent);
          this.saveSoon();
          this.events.emit('change', undefined);
        },
        onSuccess: (url) => {
          if (settled) return;
          this.update(d.key, (x) => ({ ...x, url, state: 'done', sent: x.size, error: null }));
          this.live.delete(d.key);
          this.files.delete(d.key);
          void this.o.vault.delete(d.key).catch(() => undefined);
          settle({ kind: 'done' });
        },
        onError: (error) => settle({ kind: 'error', error }),
      });
      this.active.set(d.key, {
        abort: () => {
          handle.abort();
          settle({ kind: 'aborted' });
        },
      });
    });
  }

  /** Waits ms, or less if the browser comes back online (or the draft is paused). */
  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      let stopOnline = () => {};
      const timer = this.o.platform.setTimeout(() => {
        stopOnline();
        resolve();
      }, ms);
      stopOnline = this.o.platform.onOnline(() => {
        this.o.platform.clearTimeout(timer);
        stopOnline();
        resolve();
      });
    });
  }

  // ---- storage --------------------------------------------------------------

  private sentOf(d: DraftUpload): number {
    return Math.max(d.sent, this.live.get(d.key) ?? 0);
  }

  private find(key: string): DraftUpload | undefined {
    return this.load().find((d) => d.key === key);
  }

  /** Changes one draft (read fresh from storage, since other tabs write it too); reports whether it exists. */
  private update(key: string, fn: (d: DraftUpload) => DraftUpload): boolean {
    const list = this.load();
    const i = list.findIndex((d) => d.key === key);
    if (i < 0) return false;
    list[i] = fn(list[i]!);
    this.drafts = list;
    this.save();
    this.events.emit('change', undefined);
    return true;
  }

  /** Writes the live progress of the uploads this tab sends, at most every saveEveryMs. */
  private saveSoon(): void {
    if (this.saveTimer !== null) return;
    this.saveTimer = this.o.platform.setTimeout(() => {
      this.saveTimer = null;
      const list = this.load().map((d) => (this.active.has(d.key) && d.state === 'uploading' ? { ...d, sent: this.sentOf(d) } : d));
      this.drafts = list;
      this.save();
    }, this.o.saveEveryMs ?? 500);
  }

  private load(): DraftUpload[] {
    let raw: string | null = null;
    if (this.o.storage) {
      try {
        raw = this.o.storage.getItem(uploadsStorageKey);
      } catch {
        raw = this.memory.get(uploadsStorageKey) ?? null;
      }
    } else {
      raw = this.memory.get(uploadsStorageKey) ?? null;
    }
    return parseDrafts(raw);
  }

  private save(): void {
    const raw = this.drafts.length ? JSON.stringify(this.drafts) : null;
    if (raw === null) this.memory.delete(uploadsStorageKey);
    else this.memory.set(uploadsStorageKey, raw);
    if (!this.o.storage) return;
    try {
      if (raw === null) this.o.storage.removeItem(uploadsStorageKey);
      else this.o.storage.setItem(uploadsStorageKey, raw);
    } catch {
      /* memory holds it */
    }
  }

  /** Another tab changed the drafts: follow pauses, resumes and removals. */
  private onStorage(): void {
    this.drafts = this.load();
    for (const [key, a] of this.active) {
      const d = this.find(key);
      if (!d || d.state !== 'uploading') a.abort();
    }
    for (const d of this.drafts) if (d.state === 'uploading') this.want(d.key);
    this.events.emit('change', undefined);
  }
}

/** The tus endpoint on the page's origin. */
export function uploadsEndpoint(): string {
  return new URL(Paths.uploads, globalThis.location?.href ?? 'http://localhost/').href;
}
