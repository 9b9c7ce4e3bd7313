import { describe, expect, it } from 'vitest';
import {
  attachmentsOf,
  errorAction,
  formatBytes,
  parseDrafts,
  retryDelay,
  uploadErrorText,
  uploadIdOf,
  Uploads,
  uploadsStorageKey,
  type DraftUpload,
  type FileVault,
  type Locks,
  type TransportOptions,
  type UploadPlatform,
  type UploadTransport,
} from '../src/lib/uploads';
import { FakePlatform, MemoryStorage } from './fakes';

const ID = '0190f3c4-5b6a-7c8d-9e0f-112233445566';
const url = (id = ID) => `http://x/v1/uploads/${id}`;

/** A tus transport double: each start is a run the test drives. */
class FakeTransport implements UploadTransport {
  runs: Array<{ file: Blob; o: TransportOptions; aborted: boolean }> = [];
  terminated: string[] = [];
  start(file: Blob, o: TransportOptions) {
    const run = { file, o, aborted: false };
    this.runs.push(run);
    return { abort: () => void (run.aborted = true) };
  }
  async terminate(u: string) {
    this.terminated.push(u);
  }
  get last() {
    const r = this.runs[this.runs.length - 1];
    if (!r) throw new Error('no run');
    return r;
  }
}

/** Web Locks double: one holder per name, the others queued in order. */
class FakeLocks implements Locks {
  private held = new Map<string, Array<() => void>>();
  async request(name: string, fn: () => Promise<void>): Promise<void> {
    if (this.held.has(name)) await new Promise<void>((r) => this.held.get(name)!.push(r));
    else this.held.set(name, []);
    await Promise.resolve(); // a granted lock's callback always runs later, as in browsers
    try {
      await fn();
    } finally {
      const q = this.held.get(name)!;
      const next = q.shift();
      if (next) next();
      else this.held.delete(name);
    }
  }
}

function vault(): FileVault & { m: Map<string, Blob> } {
  const m = new Map<string, Blob>();
  return { m, put: async (k, f) => void m.set(k, f), get: async (k) => m.get(k), delete: async (k) => void m.delete(k) };
}

function uploadPlatform(p: FakePlatform): UploadPlatform {
  return { setTimeout: (fn, ms) => p.setTimeout(fn, ms), clearTimeout: (t) => p.clearTimeout(t), onOnline: (cb) => p.onOnlineChange((o) => o && cb()) };
}

/** A tab: an upload manager on shared storage, vault and locks. */
function tab(shared: { storage: MemoryStorage; vault: ReturnType<typeof vault>; locks: Locks | null; p: FakePlatform; tabs: Array<() => void> }) {
  const transport = new FakeTransport();
  let n = 0;
  const u = new Uploads({
    storage: shared.storage,
    vault: shared.vault,
    transport,
    locks: shared.locks,
    platform: uploadPlatform(shared.p),
    uuid: () => `k${shared.tabs.length}-${++n}`,
    endpoint: 'http://x/v1/uploads/',
    listen: (cb) => {
      shared.tabs.push(cb);
      return () => {};
    },
  });
  return { u, transport };
}

function setup(locks: Locks | null = new FakeLocks()) {
  const shared = { storage: new MemoryStorage(), vault: vault(), locks, p: new FakePlatform(), tabs: [] as Array<() => void> };
  /** Tells every tab that storage changed (the storage event). */
  const broadcast = () => shared.tabs.forEach((cb) => cb());
  return { shared, broadcast, newTab: () => tab(shared) };
}

const tick = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setTimeout(r, 0));
};
const file = (name = 'a.txt', size = 10) => new File([new Uint8Array(size)], name, { type: 'text/plain' });

describe('upload pure functions', () => {
  it('reads an upload id from its URL', () => {
    expect(uploadIdOf(url())).toBe(ID);
    expect(uploadIdOf(`/v1/uploads/${ID.toUpperCase()}/`)).toBe(ID);
    expect(uploadIdOf('http://x/v1/uploads/not-an-id')).toBeNull();
    expect(uploadIdOf(null)).toBeNull();
  });

  it('keeps only well-formed stored drafts', () => {
    const good: DraftUpload = { key: 'k', conversation_id: 'c', name: 'a', size: 1, type: '', url: null, sent: 0, state: 'paused', error: null };
    expect(parseDrafts(JSON.stringify([good, { ...good, state: 'weird' }, { key: 1 }, null]))).toEqual([good]);
    expect(parseDrafts('not json')).toEqual([]);
    expect(parseDrafts(null)).toEqual([]);
  });

  it('attaches only when every draft is done, in order', () => {
    const d = (id: string, state: DraftUpload['state']): DraftUpload => ({ key: id, conversation_id: 'c', name: id, size: 3, type: '', url: url(`0190f3c4-5b6a-7c8d-9e0f-11223344556${id}`), sent: 3, state, error: null });
    expect(attachmentsOf([])).toEqual([]);
    expect(attachmentsOf([d('1', 'done'), d('2', 'uploading')])).toBeNull();
    expect(attachmentsOf([d('2', 'done'), d('1', 'done')])?.map((a) => a.name)).toEqual(['2', '1']);
    expect(attachmentsOf([d('1', 'done')])?.[0]).toMatchObject({ type: 'application/octet-stream', size: 3 });
  });

  it('decides what an error means', () => {
    expect([null, 500, 503, 408, 409, 423, 429].map(errorAction)).toEqual(Array(7).fill('retry'));
    expect([404, 410].map(errorAction)).toEqual(['restart', 'restart']);
    expect([400, 401, 403, 413].map(errorAction)).toEqual(Array(4).fill('fail'));
    expect(uploadErrorText({ status: 413, message: '' }, 20 << 20)).toBe('Larger than the 20 MB limit.');
    expect(uploadErrorText({ status: 400, message: 'File name: contains a path separator.' }, null)).toMatch(/path separator/);
  });

  it('formats sizes and backs off', () => {
    expect([0, 1023, 1024, 1536, 10 << 20, 20 << 20].map(formatBytes)).toEqual(['0 B', '1023 B', '1 KB', '1.5 KB', '10 MB', '20 MB']);
    expect([1, 2, 3, 6, 9].map(retryDelay)).toEqual([1000, 2000, 4000, 30000, 30000]);
  });
});

describe('Uploads', () => {
  it('stores a draft, uploads it, and attaches it once done', async () => {
    const { shared, newTab } = setup();
    const { u, transport } = newTab();
    u.start();
    expect(u.add('c1', [file('notes.txt', 10)])).toEqual([]);
    const stored = parseDrafts(shared.storage.getItem(uploadsStorageKey));
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ conversation_id: 'c1', name: 'notes.txt', state: 'uploading', url: null });
    await tick();
    expect(shared.vault.m.size).toBe(1); // kept for a reload
    expect(transport.runs).toHaveLength(1);
    expect(u.ready('c1')).toBeNull();
    transport.last.o.onUrl(url());
    expect(parseDrafts(shared.storage.getItem(uploadsStorageKey))[0]!.url).toBe(url()); // beside the task pointers
    transport.last.o.onProgress(4, 10);
    expect(u.list('c1')[0]).toMatchObject({ progress: 0.4, id: ID });
    transport.last.o.onSuccess(url());
    await tick();
    expect(u.list('c1')[0]).toMatchObject({ state: 'done', progress: 1 });
    expect(u.ready('c1')).toEqual([{ id: ID, name: 'notes.txt', size: 10, type: 'text/plain' }]);
    expect(shared.vault.m.size).toBe(0); // the server has the bytes
    u.take('c1');
    expect(u.list('c1')).toEqual([]);
    expect(shared.storage.getItem(uploadsStorageKey)).toBeNull();
  });

  it('goes on after a reload from the stored URL, with the file from the vault', async () => {
    const { shared, newTab } = setup();
    const first = newTab();
    first.u.start();
    first.u.add('c1', [file()]);
    await tick();
    first.transport.last.o.onUrl(url());
    first.u.stop(); // the page goes away mid-upload
    const again = newTab();
    again.u.start();
    await tick();
    expect(again.transport.runs).toHaveLength(1);
    expect(again.transport.last.o.url).toBe(url()); // resumes (HEAD), never a new upload
    expect(again.transport.last.file.size).toBe(10);
  });

  it('pauses, resumes, and removes (deleting the upload on the server)', async () => {
    const { shared, newTab } = setup();
    const { u, transport } = newTab();
    u.start();
    u.add('c1', [file()]);
    await tick();
    const run = transport.last;
    run.o.onUrl(url());
    u.pause(u.list('c1')[0]!.key);
    expect(run.aborted).toBe(true);
    expect(u.list('c1')[0]!.state).toBe('paused');
    await tick();
    u.resume(u.list('c1')[0]!.key);
    await tick();
    expect(transport.runs).toHaveLength(2);
    expect(transport.last.o.url).toBe(url());
    u.remove(u.list('c1')[0]!.key);
    expect(transport.last.aborted).toBe(true);
    expect(transport.terminated).toEqual([url()]);
    expect(u.list('c1')).toEqual([]);
    expect(shared.vault.m.size).toBe(0);
  });

  it('lets one tab drive an upload; another takes over when it stops, and follows pauses', async () => {
    const { shared, broadcast, newTab } = setup();
    const a = newTab();
    const b = newTab();
    a.u.start();
    b.u.start();
    a.u.add('c1', [file()]);
    broadcast();
    await tick();
    expect(a.transport.runs).toHaveLength(1);
    expect(b.transport.runs).toHaveLength(0); // queued for the lock
    a.transport.last.o.onUrl(url());
    broadcast();
    // Pause in B: A stops; the lock passes to B, which sees the pause and lets go.
    b.u.pause(b.u.list('c1')[0]!.key);
    broadcast();
    expect(a.transport.last.aborted).toBe(true);
    await tick();
    expect(b.transport.runs).toHaveLength(0);
    // Resume in A, then A goes away: B carries it on from the stored URL.
    a.u.resume(a.u.list('c1')[0]!.key);
    broadcast();
    await tick();
    expect(a.transport.runs).toHaveLength(2);
    a.u.stop();
    a.transport.last.o.onError({ status: null, message: 'gone' }); // its request died with it
    await tick(10);
    shared.p.advance(1000);
    await tick(10);
    expect(b.transport.runs).toHaveLength(1);
    expect(b.transport.last.o.url).toBe(url());
  });

  it('retries a lost network with backoff and at once when it is back; restarts a forgotten upload', async () => {
    const { shared, newTab } = setup();
    const { u, transport } = newTab();
    u.start();
    u.add('c1', [file()]);
    await tick();
    transport.last.o.onUrl(url());
    transport.last.o.onError({ status: null, message: 'offline' });
    await tick();
    expect(shared.p.pending()).toEqual([1000]);
    shared.p.setOnline(false);
    shared.p.setOnline(true); // back: no need to wait
    await tick();
    expect(transport.runs).toHaveLength(2);
    expect(transport.last.o.url).toBe(url());
    transport.last.o.onError({ status: 404, message: 'upload not found' }); // expired meanwhile
    await tick();
    shared.p.advance(2000);
    await tick();
    expect(transport.runs).toHaveLength(3);
    expect(transport.last.o.url).toBeNull(); // a new upload
    expect(u.list('c1')[0]!.state).toBe('uploading');
  });

  it('fails for good on a refusal, and says why', async () => {
    const { newTab } = setup(null);
    const { u, transport } = newTab();
    u.start();
    u.add('c1', [file('a/b')]);
    await tick();
    transport.last.o.onError({ status: 400, message: 'File name: contains a path separator (/ or \\).' });
    await tick();
    expect(u.list('c1')[0]).toMatchObject({ state: 'failed', error: expect.stringMatching(/path separator/), final: true });
    expect(u.ready('c1')).toBeNull();
    u.resume(u.list('c1')[0]!.key); // trying again cannot help
    await tick();
    expect(transport.runs).toHaveLength(1);
  });

  it('refuses an eleventh file and a file over the limit before sending anything', async () => {
    const { newTab } = setup();
    const { u, transport } = newTab();
    u.setMaxSize(100);
    u.start();
    const problems = u.add('c1', Array.from({ length: 11 }, (_, i) => file(`f${i}`, i === 0 ? 101 : 5)));
    expect(problems).toEqual(['At most 10 files a message: f10 was not added.']);
    expect(u.list('c1')).toHaveLength(10);
    expect(u.list('c1')[0]).toMatchObject({ state: 'failed', error: 'Larger than the 100 B limit.', final: true });
    await tick();
    expect(transport.runs).toHaveLength(9);
    expect(u.list('c2')).toEqual([]);
  });

  it('marks a draft whose file is gone as failed instead of uploading nothing', async () => {
    const { shared, newTab } = setup();
    shared.storage.setItem(uploadsStorageKey, JSON.stringify([{ key: 'k', conversation_id: 'c1', name: 'x', size: 3, type: '', url: null, sent: 0, state: 'uploading', error: null }]));
    const { u, transport } = newTab();
    u.start();
    for (let i = 0; i < 10; i++) {
      await tick();
      shared.p.advance(250);
    }
    await tick();
    expect(transport.runs).toHaveLength(0);
    expect(u.list('c1')[0]).toMatchObject({ state: 'failed', error: expect.stringMatching(/add it again/) });
  });
});
