import { uploadsStorageKey, type FileVault, type Locks, type UploadPlatform } from './uploads';

/**
 * The browser's side of the upload manager: IndexedDB keeps the files
 * between page loads (a File stored there is a copy the page can read after
 * F5), Web Locks make one tab at a time drive an upload, and the storage
 * event tells a tab that another one changed the drafts.
 */

const dbName = 'tether';
const storeName = 'upload-files';

/** Files in IndexedDB; null when IndexedDB is not available (then drafts live only in the tab). */
export function browserFileVault(): FileVault | null {
  const idb: IDBFactory | undefined = (globalThis as { indexedDB?: IDBFactory }).indexedDB;
  if (!idb) return null;
  let db: Promise<IDBDatabase> | null = null;
  const open = (): Promise<IDBDatabase> => {
    db ??= new Promise<IDBDatabase>((resolve, reject) => {
      const req = idb.open(dbName, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(storeName);
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error ?? new Error('IndexedDB unavailable'));
    });
    db.catch(() => (db = null));
    return db;
  };
  const run = async <T>(mode: IDBTransactionMode, fn: (s: IDBObjectStore) => IDBRequest): Promise<T> => {
    const d = await open();
    return new Promise<T>((resolve, reject) => {
      const tx = d.transaction(storeName, mode);
      const req = fn(tx.objectStore(storeName));
      tx.oncomplete = () => resolve(req.result as T);
      tx.onerror = () => reject(tx.error ?? new Error('IndexedDB request failed'));
      tx.onabort = () => reject(tx.error ?? new Error('IndexedDB request aborted'));
    });
  };
  return {
    put: (key, file) => run<unknown>('readwrite', (s) => s.put(file, key)).then(() => undefined),
    get: (key) => run<Blob | undefined>('readonly', (s) => s.get(key)),
    delete: (key) => run<unknown>('readwrite', (s) => s.delete(key)).then(() => undefined),
  };
}

/** A vault in memory, for when IndexedDB is missing: a reload forgets the files. */
export function memoryFileVault(): FileVault {
  const m = new Map<string, Blob>();
  return {
    put: async (k, f) => void m.set(k, f),
    get: async (k) => m.get(k),
    delete: async (k) => void m.delete(k),
  };
}

/** navigator.locks, or null where it is missing. */
export function browserLocks(): Locks | null {
  const locks = (globalThis.navigator as { locks?: { request(name: string, cb: () => Promise<void>): Promise<void> } } | undefined)?.locks;
  if (!locks) return null;
  return { request: (name, fn) => locks.request(name, fn) };
}

export function browserUploadPlatform(): UploadPlatform {
  return {
    setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
    clearTimeout: (t) => globalThis.clearTimeout(t as ReturnType<typeof setTimeout>),
    onOnline: (cb) => {
      globalThis.addEventListener?.('online', cb);
      return () => globalThis.removeEventListener?.('online', cb);
    },
  };
}

/** Calls back when another tab writes the stored drafts. */
export function listenDrafts(cb: () => void): () => void {
  const h = (ev: StorageEvent) => {
    if (ev.key === uploadsStorageKey || ev.key === null) cb();
  };
  globalThis.addEventListener?.('storage', h);
  return () => globalThis.removeEventListener?.('storage', h);
}
