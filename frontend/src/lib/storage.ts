import type { Attachment } from './protocol';
import type { PendingSubmit } from './restore';

/** The part of the Web Storage API the client uses (localStorage, or a fake in tests). */
export interface KeyValue {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** The task a tab waits for: the one to re-attach after a reload. */
export interface ActivePointer {
  task_id: string;
  conversation_id: string;
}

/** Storage keys; versioned so a future format can coexist. */
export const StorageKeys = {
  conversation: 'tether.v1.conversation',
  active: 'tether.v1.active',
  pending: 'tether.v1.pending',
  /** The colour theme chosen (theme.ts); absent means the system's. */
  theme: 'tether.v1.theme',
} as const;

/** Pending submits kept at most; older ones are the least likely to matter. */
const maxPending = 20;

/**
 * The pointers a browser keeps between page loads: which conversation is open,
 * which task it waits for, and submits not yet confirmed by the server. The
 * conversation itself lives on the server; only these ids (and a pending
 * submit's text, so it can be sent again with the same id) live here.
 *
 * Every write goes to storage synchronously, so a pointer written before a
 * send survives a reload that happens right after it. When storage is not
 * usable (disabled, full, a private window) the pointers live in memory and
 * the tab still works; only a reload forgets them.
 */
export class Pointers {
  private readonly memory = new Map<string, string>();

  constructor(private readonly kv: KeyValue | null) {}

  private get(key: string): string | null {
    if (this.kv) {
      try {
        return this.kv.getItem(key);
      } catch {
        /* fall through to memory */
      }
    }
    return this.memory.get(key) ?? null;
  }

  private set(key: string, value: string | null): void {
    if (value === null) this.memory.delete(key);
    else this.memory.set(key, value);
    if (!this.kv) return;
    try {
      if (value === null) this.kv.removeItem(key);
      else this.kv.setItem(key, value);
    } catch {
      /* memory already holds it */
    }
  }

  private json<T>(key: string): T | null {
    const raw = this.get(key);
    if (raw === null) return null;
    try {
      return JSON.parse(raw) as T;
    } catch {
      return null;
    }
  }

  conversation(): string | null {
    return this.get(StorageKeys.conversation);
  }

  setConversation(id: string): void {
    this.set(StorageKeys.conversation, id);
  }

  active(): ActivePointer | null {
    const p = this.json<ActivePointer>(StorageKeys.active);
    return p && typeof p.task_id === 'string' && typeof p.conversation_id === 'string' ? p : null;
  }

  setActive(p: ActivePointer): void {
    this.set(StorageKeys.active, JSON.stringify({ task_id: p.task_id, conversation_id: p.conversation_id }));
  }

  /** Clears the active pointer if it still names taskId (another tab may have moved it on). */
  clearActive(taskId: string): void {
    if (this.active()?.task_id === taskId) this.set(StorageKeys.active, null);
  }

  pending(): PendingSubmit[] {
    const list = this.json<PendingSubmit[]>(StorageKeys.pending);
    if (!Array.isArray(list)) return [];
    return list
      .filter((p) => p && typeof p.task_id === 'string' && typeof p.conversation_id === 'string' && typeof p.content === 'string')
      .map((p) => {
        const attachments = validAttachments(p.attachments);
        return { task_id: p.task_id, conversation_id: p.conversation_id, content: p.content, ...(attachments.length ? { attachments } : {}), ...placement(p) };
      });
  }

  pendingFor(taskId: string): PendingSubmit | undefined {
    return this.pending().find((p) => p.task_id === taskId);
  }

  removePending(taskId: string): void {
    const list = this.pending();
    const rest = list.filter((p) => p.task_id !== taskId);
    if (rest.length === list.length) return;
    this.set(StorageKeys.pending, rest.length ? JSON.stringify(rest) : null);
  }

  /**
   * Records a submit before it is sent: the open conversation, the active
   * task, and the submit itself. Called before the first byte goes out, so a
   * reload at any later moment finds the id and re-sends it, never a new one.
   */
  recordSubmit(s: PendingSubmit): void {
    this.setConversation(s.conversation_id);
    const rest = this.pending().filter((p) => p.task_id !== s.task_id);
    const attachments = validAttachments(s.attachments);
    rest.push({ task_id: s.task_id, conversation_id: s.conversation_id, content: s.content, ...(attachments.length ? { attachments } : {}), ...placement(s) });
    this.set(StorageKeys.pending, JSON.stringify(rest.slice(-maxPending)));
    this.setActive({ task_id: s.task_id, conversation_id: s.conversation_id });
  }
}

/** Where a stored submit's turn goes, when it says (a version, or a turn after an earlier one). */
export function placement(p: { parent_task_id?: unknown; version_of?: unknown }): { parent_task_id?: string; version_of?: string } {
  if (typeof p.version_of === 'string' && p.version_of) return { version_of: p.version_of };
  if (typeof p.parent_task_id === 'string' && p.parent_task_id) return { parent_task_id: p.parent_task_id };
  return {};
}

/** The well-formed attachments of a stored submit (they may come from an older page). */
export function validAttachments(v: unknown): Attachment[] {
  if (!Array.isArray(v)) return [];
  return v
    .filter((a) => a && typeof a.id === 'string' && typeof a.name === 'string' && Number.isSafeInteger(a.size) && typeof a.type === 'string')
    .map((a: Attachment) => ({ id: a.id, name: a.name, size: a.size, type: a.type }));
}
