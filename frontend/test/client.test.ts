import { describe, expect, it } from 'vitest';
import { TetherClient, type ConversationView } from '../src/lib/client';
import { StorageKeys } from '../src/lib/storage';
import type { ClientMessage, Message, Task } from '../src/lib/protocol';
import { FakeBus, FakePlatform, MemoryStorage, mkTask, seqUUID, type FakeChannel } from './fakes';

function setup(opts: { storage?: MemoryStorage; channel?: FakeChannel | null; pageSize?: number; open?: string } = {}) {
  const p = new FakePlatform();
  const storage = opts.storage ?? new MemoryStorage();
  const client = new TetherClient({ platform: p, storage, channel: opts.channel ?? null, uuid: seqUUID(), url: 'ws://x/v1/ws', pingIntervalMs: 0, pageSize: opts.pageSize });
  const views: ConversationView[] = [];
  client.events.on('view', (v) => views.push(v));
  const started = client.start(opts.open);
  // The client sends a view once a frame: paint one, then read the last view.
  const last = () => {
    p.frame();
    return views[views.length - 1]!;
  };
  return { p, client, storage, views, started, last };
}

type Req<T extends ClientMessage['type']> = Extract<ClientMessage, { type: T }>;

/** Finds the newest unanswered request of a type. */
function req<T extends ClientMessage['type']>(p: FakePlatform, type: T, pred: (m: Req<T>) => boolean = () => true): Req<T> {
  const m = p.socket.ofType(type).reverse().find(pred);
  if (!m) throw new Error(`no ${type}: ${JSON.stringify(p.socket.sent)}`);
  return m;
}

function msg(over: Partial<Message> & { id: string }): Message {
  return { conversation_id: 'c1', role: 'user', content: '', task_id: null, status: null, created_at: '2025-01-01T00:00:00Z', ...over };
}

function pair(taskId: string, n: number, status: Message['status'] = 'done', content = `answer ${n}`): Message[] {
  return [
    msg({ id: `u${n}`, role: 'user', content: `question ${n}`, task_id: taskId }),
    msg({ id: `a${n}`, role: 'assistant', content, task_id: taskId, status }),
  ];
}

function answerHistory(p: FakePlatform, messages: Message[], next: string | null = null, before?: string) {
  const h = req(p, 'history', (m) => m.before === before);
  p.socket.push({ type: 'history', req: h.req, messages, next });
}

function answerConversations(p: FakePlatform) {
  const c = req(p, 'conversations');
  p.socket.push({ type: 'conversations', req: c.req, conversations: [{ id: 'c1', title: 'first', updated_at: '2025-01-01T00:00:00Z', active_task_id: null }], next: null });
}

const tick = () => new Promise((r) => setTimeout(r, 0));

function stored(storage: MemoryStorage) {
  return {
    conversation: storage.getItem(StorageKeys.conversation),
    active: JSON.parse(storage.getItem(StorageKeys.active) ?? 'null') as { task_id: string } | null,
    pending: JSON.parse(storage.getItem(StorageKeys.pending) ?? '[]') as Array<{ task_id: string; content: string }>,
  };
}

describe('TetherClient submit', () => {
  it('stores the pointers before the submit is sent and shows the messages at once', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, client, started, last } = setup({ storage });
    p.socket.open();
    answerHistory(p, []);
    await started;
    let atSend: ReturnType<typeof stored> | null = null;
    let viewAtSend: ConversationView | null = null;
    p.socket.onSend = (m) => {
      if (m.type === 'submit') {
        atSend = stored(storage);
        viewAtSend = client.view();
      }
    };
    const id = client.submit('hello there');
    const sent = req(p, 'submit');
    expect(sent).toMatchObject({ task_id: id, conversation_id: 'c1', content: 'hello there' });
    expect(atSend).toEqual({ conversation: 'c1', active: { task_id: id, conversation_id: 'c1' }, pending: [{ task_id: id, conversation_id: 'c1', content: 'hello there' }] });
    expect(viewAtSend!.messages.map((m) => [m.role, m.status, m.content])).toEqual([
      ['user', null, 'hello there'],
      ['assistant', 'generating', ''],
    ]);
    expect(last().busy).toBe(true);
    expect(last().messages[0]!.sending).toBe(true);
    // confirmed: the pending record goes, the active pointer stays while it runs
    p.socket.push({ type: 'submitted', req: sent.req, created: true, task: mkTask({ id, status: 'pending', seq: 1, input: 'hello there' }) });
    expect(stored(storage).pending).toEqual([]);
    expect(stored(storage).active!.task_id).toBe(id);
    expect(last().messages[0]!.sending).toBe(false);
    p.socket.push({ type: 'delta', task_id: id, seq: 2, attempt: 1, text: 'hi' }, { type: 'progress', task_id: id, seq: 3, attempt: 1, progress: 50 });
    const a = last().messages[1]!;
    expect(a).toMatchObject({ content: 'hi', progress: 50, status: 'generating', canCancel: true, canRetry: false });
    p.socket.push({ type: 'status', task_id: id, seq: 4, status: 'done', attempt: 1, error: null, result_ref: null });
    expect(last().messages[1]).toMatchObject({ content: 'hi', status: 'done', canCancel: false });
    expect(last().busy).toBe(false);
    expect(stored(storage).active).toBeNull();
    expect(req(p, 'unsubscribe').task_id).toBe(id);
  });

  it('waits for the connection and re-sends the same id after a lost connection', async () => {
    const { p, client, storage } = setup();
    const id = client.submit('offline text'); // not connected yet
    expect(p.socket.sent).toEqual([]);
    expect(stored(storage).pending[0]!.task_id).toBe(id);
    p.socket.open();
    expect(req(p, 'submit').task_id).toBe(id);
    p.socket.serverClose(1006);
    p.advance(30_000);
    p.socket.open();
    expect(p.socket.ofType('submit').map((m) => m.task_id)).toEqual([id]);
    expect(client.view().messages.filter((m) => m.role === 'user')).toHaveLength(1);
  });

  it('refuses to send while an answer is still generating in the conversation', async () => {
    const { p, client, started } = setup();
    p.socket.open();
    answerHistory(p, []);
    await started;
    client.submit('one');
    expect(() => client.submit('two')).toThrow(/still being generated/);
  });

  it('shows a refused submit as failed, with a retry only when retrying can help', async () => {
    const { p, client, storage } = setup();
    p.socket.open();
    const id = client.submit('x');
    p.socket.push({ type: 'error', req: req(p, 'submit').req, code: 'conflict', message: 'conflict' });
    let a = client.view().messages[1]!;
    expect(a).toMatchObject({ status: 'failed', canRetry: false });
    expect(stored(storage).pending).toEqual([]);
    expect(stored(storage).active).toBeNull();
    client.newConversation();
    const id2 = client.submit('y');
    p.socket.push({ type: 'error', req: req(p, 'submit').req, code: 'rate_limited', message: 'slow down' });
    a = client.view().messages[1]!;
    expect(a).toMatchObject({ status: 'failed', canRetry: true });
    expect(stored(storage).pending.map((x) => x.task_id)).toEqual([id2]);
    expect(id).not.toBe(id2);
  });
});

describe('TetherClient restore', () => {
  function saved(over: { active?: string; pending?: Array<{ task_id: string; content: string }> } = {}) {
    const s = new MemoryStorage();
    s.setItem(StorageKeys.conversation, 'c1');
    if (over.active) s.setItem(StorageKeys.active, JSON.stringify({ task_id: over.active, conversation_id: 'c1' }));
    if (over.pending) s.setItem(StorageKeys.pending, JSON.stringify(over.pending.map((x) => ({ ...x, conversation_id: 'c1' }))));
    return s;
  }

  it('re-attaches a running task and continues from the snapshot (progress never restarts at 0)', async () => {
    const { p, client, started, last, views } = setup({ storage: saved({ active: 'tA' }) });
    p.socket.open();
    expect(req(p, 'subscribe').task_id).toBe('tA');
    answerHistory(p, [...pair('t0', 1), ...pair('tA', 2, 'generating', '')]);
    await started;
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'running', seq: 40, progress: 37, output: 't1 t2 t3 ' }) });
    const a = last().messages[3]!;
    expect(a).toMatchObject({ content: 't1 t2 t3 ', progress: 37, status: 'generating', canRetry: false, canCancel: true });
    expect(last().busy).toBe(true);
    // progress shown for this task was never 0 once the snapshot was in
    const shown = views.map((v) => v.messages.find((m) => m.task_id === 'tA' && m.role === 'assistant')?.progress).filter((x) => x !== null && x !== undefined);
    expect(shown[0]).toBe(37);
    p.socket.push({ type: 'delta', task_id: 'tA', seq: 41, attempt: 1, text: 't4 ' });
    expect(last().messages[3]!.content).toBe('t1 t2 t3 t4 ');
    expect(client.pointers.active()?.task_id).toBe('tA');
    // only one subscribe although history also shows it generating
    expect(p.socket.ofType('subscribe')).toHaveLength(1);
  });

  it('continues an answer whose runner was lost, marks it resumed, and never shows less than the kept text', async () => {
    const { p, started, last, views } = setup({ storage: saved({ active: 'tA' }) });
    p.socket.open();
    answerHistory(p, pair('tA', 1, 'generating', ''));
    await started;
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'running', seq: 5, progress: 20, output: 't1 t2 ' }) });
    p.socket.push({ type: 'delta', task_id: 'tA', seq: 6, attempt: 1, text: 't3 ' });
    p.frame();
    const from = views.length;
    // The runner died; the new attempt kept 't1 t2 ' (6 bytes) and continues.
    // A frame is painted after each message, so every state is a view.
    for (const m of [
      { type: 'status', task_id: 'tA', seq: 6, status: 'pending', attempt: 2, keep: 6, error: null, result_ref: null },
      { type: 'status', task_id: 'tA', seq: 7, status: 'running', attempt: 2, keep: 6, error: null, result_ref: null },
      { type: 'delta', task_id: 'tA', seq: 8, attempt: 2, text: 't3 ' },
      { type: 'delta', task_id: 'tA', seq: 8, attempt: 1, text: 'stale ' },
      { type: 'status', task_id: 'tA', seq: 9, status: 'done', attempt: 2, error: null, result_ref: null },
    ] as const) {
      p.socket.push(m);
      p.frame();
    }
    const shown = views.slice(from).map((v) => v.messages[1]!);
    expect(shown.map((m) => m.content).every((c) => c.startsWith('t1 t2 '))).toBe(true);
    expect(shown.map((m) => m.progress).filter((x) => x !== null)).not.toContain(0);
    expect(last().messages[1]).toMatchObject({ content: 't1 t2 t3 ', status: 'done', attempt: 2, resumed: true, error: null });
  });

  it('does not mark an answer resumed when its new attempt starts over (keep 0)', async () => {
    const { p, started, last } = setup({ storage: saved({ active: 'tA' }) });
    p.socket.open();
    answerHistory(p, pair('tA', 1, 'generating', ''));
    await started;
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'running', seq: 5, progress: 20, output: 't1 t2 ' }) });
    p.socket.push({ type: 'status', task_id: 'tA', seq: 6, status: 'pending', attempt: 2, keep: 4, error: null, result_ref: null });
    expect(last().messages[1]).toMatchObject({ content: 't1 t', resumed: true });
    // That attempt's engine could not continue: a third attempt starts over.
    p.socket.push({ type: 'status', task_id: 'tA', seq: 7, status: 'pending', attempt: 3, error: null, result_ref: null });
    expect(last().messages[1]).toMatchObject({ content: '', progress: 0, attempt: 3, resumed: false, status: 'generating' });
  });

  it('shows a done task, then clears the pointer', async () => {
    const { p, client, started, last } = setup({ storage: saved({ active: 'tA' }) });
    p.socket.open();
    let activeWhenRendered: unknown = 'unset';
    client.events.on('view', (v) => {
      if (v.messages.some((m) => m.task_id === 'tA' && m.status === 'done' && m.content === 'full answer') && activeWhenRendered === 'unset') {
        activeWhenRendered = client.pointers.active()?.task_id ?? null;
      }
    });
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'done', seq: 9, progress: 100, output: 'full answer' }) });
    answerHistory(p, pair('tA', 1, 'done', 'full answer'));
    await started;
    expect(client.pointers.active()?.task_id).toBe('tA'); // not shown yet ...
    p.frame();
    expect(activeWhenRendered).toBe('tA'); // rendered first ...
    expect(client.pointers.active()).toBeNull(); // ... then cleared
    expect(last().messages[1]).toMatchObject({ status: 'done', content: 'full answer' });
  });

  it('reloads history for an answer too large for its snapshot (result_ref)', async () => {
    const { p, started, last } = setup({ storage: saved({ active: 'tA' }) });
    p.socket.open();
    // History was read while the answer was still generating ...
    answerHistory(p, pair('tA', 1, 'generating', ''));
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'done', seq: 9, output: '', result_ref: 'r1' }) });
    await started;
    // ... so the finished snapshot, whose text is out of row, asks for it again.
    expect(p.socket.ofType('history').length).toBeGreaterThanOrEqual(2);
    answerHistory(p, pair('tA', 1, 'done', 'a very long answer'));
    await tick();
    expect(last().messages[1]).toMatchObject({ status: 'done', content: 'a very long answer' });
  });

  it('shows a failed task with its error and a retry that re-submits the same id', async () => {
    const { p, client, started, last, storage } = setup({ storage: saved({ active: 'tA' }) });
    p.socket.open();
    answerHistory(p, pair('tA', 1, 'failed', 't1 t2 '));
    await started;
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'failed', error: 'demo failure', seq: 9, output: 't1 t2 ', input: 'question 1' }) });
    const a = last().messages[1]!;
    expect(a).toMatchObject({ status: 'failed', error: 'demo failure', canRetry: true, canCancel: false });
    expect(client.pointers.active()?.task_id).toBe('tA'); // kept so a reload still offers the retry
    client.retry('tA');
    const s = req(p, 'submit');
    expect(s).toMatchObject({ task_id: 'tA', conversation_id: 'c1', content: 'question 1' });
    expect(stored(storage).pending[0]).toMatchObject({ task_id: 'tA', content: 'question 1' });
    expect(last().messages[1]).toMatchObject({ status: 'generating', content: '', canRetry: false });
    p.socket.push({ type: 'submitted', req: s.req, created: false, task: mkTask({ id: 'tA', status: 'pending', attempt: 2, seq: 10, output: '' }) });
    p.socket.push({ type: 'delta', task_id: 'tA', seq: 11, attempt: 2, text: 'again' });
    expect(last().messages[1]).toMatchObject({ status: 'generating', content: 'again', attempt: 2 });
  });

  it('re-sends a stored pending submit with the same id when the server does not know it', async () => {
    const storage = saved({ active: 'tA', pending: [{ task_id: 'tA', content: 'lost in flight' }] });
    const { p, started, last } = setup({ storage });
    // the echo shows before anything is answered
    expect(last().messages.map((m) => m.content)).toEqual(['lost in flight', '']);
    p.socket.open();
    p.socket.push({ type: 'error', req: req(p, 'subscribe').req, code: 'not_found', message: 'no such task' });
    const s = req(p, 'submit');
    expect(s).toMatchObject({ task_id: 'tA', conversation_id: 'c1', content: 'lost in flight' });
    answerHistory(p, []);
    await started;
    p.socket.push({ type: 'submitted', req: s.req, created: true, task: mkTask({ id: 'tA', status: 'pending', seq: 1 }) });
    expect(stored(storage).pending).toEqual([]);
    expect(last().messages).toHaveLength(2);
    expect(last().busy).toBe(true);
  });

  it('drops a stored pending submit once the server has the task, without re-sending it', async () => {
    const storage = saved({ active: 'tA', pending: [{ task_id: 'tA', content: 'arrived' }] });
    const { p } = setup({ storage });
    p.socket.open();
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'failed', seq: 5, error: 'no_runner' }) });
    expect(p.socket.ofType('submit')).toHaveLength(0);
    expect(stored(storage).pending).toEqual([]);
  });

  it('clears a pointer the server does not know when there is nothing to re-send', async () => {
    const storage = saved({ active: 'tA' });
    const { p, client, started, last } = setup({ storage });
    p.socket.open();
    p.socket.push({ type: 'error', req: req(p, 'subscribe').req, code: 'not_found', message: 'no such task' });
    answerHistory(p, []);
    await started;
    expect(client.pointers.active()).toBeNull();
    expect(p.socket.ofType('submit')).toHaveLength(0);
    expect(last()).toMatchObject({ busy: false, messages: [] });
  });

  it('treats a conversation the server does not know as empty', async () => {
    const { p, started, last } = setup({ storage: saved() });
    p.socket.open();
    const h = req(p, 'history');
    p.socket.push({ type: 'error', req: h.req, code: 'not_found', message: 'no such conversation' });
    await started;
    expect(last()).toMatchObject({ loaded: true, messages: [], hasOlder: false, error: null });
  });

  it('opens the conversation the URL names instead of the stored one', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, client, started, last } = setup({ storage, open: 'c2' });
    p.socket.open();
    expect(req(p, 'history').conversation_id).toBe('c2');
    answerHistory(p, pair('t2', 2).map((m) => ({ ...m, conversation_id: 'c2' })));
    await started;
    expect(client.conversationId).toBe('c2');
    expect(client.conversationMissing).toBe(false);
    expect(last()).toMatchObject({ id: 'c2', loaded: true });
    expect(storage.getItem(StorageKeys.conversation)).toBe('c2');
  });

  it('says a conversation the URL names is missing, and keeps the stored pointer off it', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, client, started } = setup({ storage, open: 'theirs' });
    expect(client.conversationMissing).toBe(false); // not asked yet
    p.socket.open();
    p.socket.push({ type: 'error', req: req(p, 'history').req, code: 'not_found', message: 'no such conversation' });
    await started;
    expect(client.conversationId).toBe('theirs');
    expect(client.conversationMissing).toBe(true);
    expect(storage.getItem(StorageKeys.conversation)).toBe('c1');
  });

  it('a new conversation, or one with a submit of this tab, is never missing', async () => {
    const { p, client, started } = setup();
    p.socket.open();
    p.socket.push({ type: 'error', req: req(p, 'history').req, code: 'not_found', message: 'no such conversation' });
    await started;
    client.newConversation();
    expect(client.conversationMissing).toBe(false);
    client.submit('hello');
    expect(client.conversationMissing).toBe(false);
  });

  it('makes and stores a conversation id when none is stored', async () => {
    const { p, client, storage } = setup();
    expect(storage.getItem(StorageKeys.conversation)).toBe(client.conversationId);
    p.socket.open();
    expect(req(p, 'history').conversation_id).toBe(client.conversationId);
  });
});

describe('TetherClient history', () => {
  it('loads older pages with the cursor, in order, without duplicates', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, client, started, last } = setup({ storage, pageSize: 4 });
    p.socket.open();
    answerHistory(p, [...pair('t3', 3), ...pair('t4', 4)], 'cur-2');
    await started;
    expect(last().hasOlder).toBe(true);
    const older = client.loadOlder();
    expect(req(p, 'history', (m) => m.before === 'cur-2')).toMatchObject({ conversation_id: 'c1', limit: 4 });
    answerHistory(p, [...pair('t2', 2), ...pair('t3', 3)], 'cur-1', 'cur-2'); // overlaps by one pair
    await older;
    const o2 = client.loadOlder();
    answerHistory(p, pair('t1', 1), null, 'cur-1');
    await o2;
    expect(last().messages.map((m) => m.id)).toEqual(['u1', 'a1', 'u2', 'a2', 'u3', 'a3', 'u4', 'a4']);
    expect(last().hasOlder).toBe(false);
    await client.loadOlder(); // nothing more to ask
    expect(p.socket.ofType('history')).toHaveLength(3);
  });

  it('attaches to a task that history shows generating', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, started } = setup({ storage });
    p.socket.open();
    answerHistory(p, pair('tX', 1, 'generating', ''));
    await started;
    expect(req(p, 'subscribe').task_id).toBe('tX');
  });
});

describe('TetherClient across tabs and devices', () => {
  it('shows a task started on another device: list, history and stream', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, client, started, last } = setup({ storage });
    const lists: string[][] = [];
    client.events.on('conversations', (l) => lists.push(l.map((c) => `${c.id}:${c.active_task_id ?? '-'}`)));
    p.socket.open();
    answerHistory(p, pair('t1', 1));
    answerConversations(p);
    await started;
    const { output: _, ...info } = mkTask({ id: 't2', status: 'pending', conversation_id: 'c1', updated_at: '2025-01-02T00:00:00Z' });
    p.socket.push({ type: 'task', task: info });
    expect(lists[lists.length - 1]).toEqual(['c1:t2']);
    expect(req(p, 'subscribe').task_id).toBe('t2');
    answerHistory(p, [...pair('t1', 1), ...pair('t2', 2, 'generating', '')]);
    await tick();
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 't2', seq: 3, output: 'abc', progress: 12 }) });
    expect(last().messages.map((m) => m.id)).toEqual(['u1', 'a1', 'u2', 'a2']);
    expect(last().messages[3]).toMatchObject({ content: 'abc', progress: 12 });
    expect(last().busy).toBe(true);
  });

  it('shows a submit and a cancel from another tab at once', async () => {
    const bus = new FakeBus();
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const A = setup({ storage, channel: bus.channel() });
    const B = setup({ storage, channel: bus.channel() });
    for (const t of [A, B]) {
      t.p.socket.open();
      answerHistory(t.p, []);
      await t.started;
    }
    const id = A.client.submit('from A');
    // B shows it before any server reply
    expect(B.last().messages.map((m) => [m.role, m.content, m.status])).toEqual([
      ['user', 'from A', null],
      ['assistant', '', 'generating'],
    ]);
    expect(B.last().busy).toBe(true);
    expect(req(B.p, 'subscribe').task_id).toBe(id);
    B.p.socket.push({ type: 'snapshot', req: req(B.p, 'subscribe').req, task: mkTask({ id, seq: 2, output: 'x' }) });
    void B.client.cancel(id);
    expect(req(B.p, 'cancel').task_id).toBe(id);
    expect(A.last().messages[1]).toMatchObject({ cancelling: true, canCancel: false });
    expect(B.last().messages[1]).toMatchObject({ cancelling: true, canCancel: false });
  });

  it('re-sends the same id when another tab\'s submit has not reached the server yet', async () => {
    const bus = new FakeBus();
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const A = setup({ storage, channel: bus.channel() });
    const B = setup({ storage, channel: bus.channel() });
    B.p.socket.open();
    const id = A.client.submit('from A'); // A is not connected
    B.p.socket.push({ type: 'error', req: req(B.p, 'subscribe').req, code: 'not_found', message: 'no' });
    expect(req(B.p, 'submit')).toMatchObject({ task_id: id, content: 'from A' });
  });
});

describe('TetherClient cancel', () => {
  it('is idempotent and shows cancelling until the status arrives', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, client, started, last } = setup({ storage });
    p.socket.open();
    answerHistory(p, []);
    await started;
    const id = client.submit('long');
    p.socket.push({ type: 'submitted', req: req(p, 'submit').req, created: true, task: mkTask({ id, status: 'running', seq: 1 }) });
    const c1 = client.cancel(id);
    expect(last().messages[1]).toMatchObject({ cancelling: true, canCancel: false, status: 'generating' });
    p.socket.push({ type: 'cancelled', req: req(p, 'cancel').req, task: mkTask({ id, status: 'running', seq: 1 }) });
    await c1;
    p.socket.push({ type: 'status', task_id: id, seq: 2, status: 'cancelled', attempt: 1, error: null, result_ref: null });
    expect(last().messages[1]).toMatchObject({ status: 'cancelled', cancelling: false, canRetry: false });
    const c2 = client.cancel(id);
    const t: Task = mkTask({ id, status: 'cancelled', seq: 2 });
    p.socket.push({ type: 'cancelled', req: req(p, 'cancel').req, task: t });
    await c2;
    expect(last().messages[1]!.status).toBe('cancelled');
  });
});
