import type { Attachment } from './protocol';
import type { KeyValue } from './storage';

/**
 * What one tab tells the other tabs of the same browser, so they show it at
 * once rather than after the server's `task` event makes the round trip (or
 * at all, while they are disconnected).
 */
export type SyncMessage =
  | { kind: 'submit'; task_id: string; conversation_id: string; content: string; attachments?: Attachment[]; parent_task_id?: string; version_of?: string }
  | { kind: 'cancel'; task_id: string }
  | { kind: 'retry'; task_id: string; conversation_id: string; content: string; attachments?: Attachment[]; parent_task_id?: string; version_of?: string };

/** A channel between the tabs of one browser. */
export interface TabChannel {
  post(msg: SyncMessage): void;
  /** Calls back for messages of other tabs (never this tab's own); returns a function that stops it. */
  listen(cb: (msg: SyncMessage) => void): () => void;
  close(): void;
}

const channelName = 'tether.v1';
const storageKey = 'tether.v1.sync';

interface StorageEventTarget {
  addEventListener(type: 'storage', cb: (ev: { key: string | null; newValue: string | null }) => void): void;
  removeEventListener(type: 'storage', cb: (ev: { key: string | null; newValue: string | null }) => void): void;
}

function valid(v: unknown): v is SyncMessage {
  if (!v || typeof v !== 'object') return false;
  const m = v as Record<string, unknown>;
  if (typeof m.task_id !== 'string') return false;
  if (m.kind === 'cancel') return true;
  return (m.kind === 'submit' || m.kind === 'retry') && typeof m.conversation_id === 'string' && typeof m.content === 'string';
}

/**
 * The browser's channel: BroadcastChannel where it exists, else the `storage`
 * event (which fires in every other tab of the origin when one tab writes a
 * key). Returns null when neither is available.
 */
export function browserTabChannel(storage: KeyValue | null): TabChannel | null {
  if (typeof BroadcastChannel === 'function') {
    const bc = new BroadcastChannel(channelName);
    return {
      post: (msg) => bc.postMessage(msg),
      listen: (cb) => {
        const h = (ev: MessageEvent) => {
          if (valid(ev.data)) cb(ev.data);
        };
        bc.addEventListener('message', h);
        return () => bc.removeEventListener('message', h);
      },
      close: () => bc.close(),
    };
  }
  const target = globalThis as unknown as Partial<StorageEventTarget>;
  if (!storage || typeof target.addEventListener !== 'function') return null;
  return storageTabChannel(storage, target as StorageEventTarget);
}

/** The `storage`-event fallback: each post writes a fresh value so the event fires. */
export function storageTabChannel(storage: KeyValue, target: StorageEventTarget): TabChannel {
  let n = 0;
  const nonce = Math.random().toString(36).slice(2);
  return {
    post: (msg) => {
      try {
        storage.setItem(storageKey, JSON.stringify({ msg, n: `${nonce}-${n++}` }));
      } catch {
        /* storage full or disabled: other tabs learn it from the server */
      }
    },
    listen: (cb) => {
      const h = (ev: { key: string | null; newValue: string | null }) => {
        if (ev.key !== storageKey || !ev.newValue) return;
        try {
          const v = JSON.parse(ev.newValue) as { msg?: unknown };
          if (valid(v.msg)) cb(v.msg);
        } catch {
          /* not ours */
        }
      };
      target.addEventListener('storage', h);
      return () => target.removeEventListener('storage', h);
    },
    close: () => {},
  };
}
