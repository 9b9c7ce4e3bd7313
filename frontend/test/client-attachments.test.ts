import { describe, expect, it } from 'vitest';
import { TetherClient, type ConversationView } from '../src/lib/client';
import { StorageKeys } from '../src/lib/storage';
import type { Attachment, ClientMessage, Message } from '../src/lib/protocol';
import { FakeBus, FakePlatform, MemoryStorage, mkTask, seqUUID } from './fakes';

const A: Attachment = { id: '0190f3c4-5b6a-7c8d-9e0f-112233445566', name: 'notes.txt', size: 12, type: 'text/plain' };
const B: Attachment = { id: '0190f3c4-5b6a-7c8d-9e0f-112233445577', name: 'photo.jpg', size: 2048, type: 'image/jpeg' };

function setup(storage = new MemoryStorage(), channel: ReturnType<FakeBus['channel']> | null = null) {
  const p = new FakePlatform();
  const client = new TetherClient({ platform: p, storage, channel, uuid: seqUUID(), url: 'ws://x/v1/ws', pingIntervalMs: 0 });
  const views: ConversationView[] = [];
  client.events.on('view', (v) => views.push(v));
  const started = client.start();
  // The client sends a view once a frame: paint one, then read the last view.
  const last = () => {
    p.frame();
    return views[views.length - 1]!;
  };
  return { p, client, storage, started, last };
}

type Req<T extends ClientMessage['type']> = Extract<ClientMessage, { type: T }>;
function req<T extends ClientMessage['type']>(p: FakePlatform, type: T): Req<T> {
  const m = p.socket.ofType(type).reverse()[0];
  if (!m) throw new Error(`no ${type}: ${JSON.stringify(p.socket.sent)}`);
  return m;
}

function answerHistory(p: FakePlatform, messages: Message[]) {
  p.socket.push({ type: 'history', req: req(p, 'history').req, messages, next: null });
}

describe('TetherClient attachments', () => {
  it('sends the attachment ids with the submit, stores them with it, and shows them at once', async () => {
    const { p, client, storage, started, last } = setup();
    p.socket.open();
    answerHistory(p, []);
    await started;
    const id = client.submit('look at these', client.conversationId, [A, B]);
    const sent = req(p, 'submit');
    expect(sent).toMatchObject({ task_id: id, content: 'look at these', attachments: [A.id, B.id] });
    const pending = JSON.parse(storage.getItem(StorageKeys.pending)!);
    expect(pending[0].attachments).toEqual([A, B]);
    expect(last().messages[0]).toMatchObject({ role: 'user', attachments: [A, B] });
    expect(last().messages[1]).toMatchObject({ role: 'assistant', attachments: [] });
  });

  it('sends no attachments field without attachments', async () => {
    const { p, client, started } = setup();
    p.socket.open();
    answerHistory(p, []);
    await started;
    client.submit('plain');
    expect(req(p, 'submit')).not.toHaveProperty('attachments');
  });

  it('re-sends a stored submit after a reload with the same attachments', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    storage.setItem(StorageKeys.active, JSON.stringify({ task_id: 'tA', conversation_id: 'c1' }));
    storage.setItem(StorageKeys.pending, JSON.stringify([{ task_id: 'tA', conversation_id: 'c1', content: 'q', attachments: [A, { id: 5 }] }]));
    const { p, last } = setup(storage);
    expect(last().messages[0]).toMatchObject({ content: 'q', attachments: [A] });
    p.socket.open();
    p.socket.push({ type: 'error', req: req(p, 'subscribe').req, code: 'not_found', message: 'no such task' });
    expect(req(p, 'submit')).toMatchObject({ task_id: 'tA', content: 'q', attachments: [A.id] });
  });

  it('retries a failed task with the attachments its message carries', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    storage.setItem(StorageKeys.active, JSON.stringify({ task_id: 'tA', conversation_id: 'c1' }));
    const { p, client, started, last } = setup(storage);
    p.socket.open();
    const base = { conversation_id: 'c1', created_at: '2025-01-01T00:00:00Z', task_id: 'tA' };
    answerHistory(p, [
      { ...base, id: 'u1', role: 'user', content: 'q', status: null, attachments: [B] },
      { ...base, id: 'a1', role: 'assistant', content: '', status: 'failed', attachments: [] },
    ]);
    await started;
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'failed', error: 'demo failure', input: 'q' }) });
    expect(last().messages[0]!.attachments).toEqual([B]);
    client.retry('tA');
    expect(req(p, 'submit')).toMatchObject({ task_id: 'tA', content: 'q', attachments: [B.id] });
  });

  it('shows another tab’s submit with its attachments', async () => {
    const bus = new FakeBus();
    const one = setup(new MemoryStorage(), bus.channel());
    const two = setup(new MemoryStorage(), bus.channel());
    for (const t of [one, two]) {
      t.p.socket.open();
      answerHistory(t.p, []);
      await t.started;
    }
    const opened = two.client.openConversation(one.client.conversationId);
    answerHistory(two.p, []);
    await opened;
    one.client.submit('from one', one.client.conversationId, [A]);
    expect(two.last().messages[0]).toMatchObject({ content: 'from one', attachments: [A] });
  });

  it('sends files without text as the empty text, and refuses a message with neither', async () => {
    const { p, client, started, last } = setup();
    p.socket.open();
    answerHistory(p, []);
    await started;
    expect(() => client.submit('  ', client.conversationId)).toThrow('empty message');
    const id = client.submit(' \n ', client.conversationId, [A]);
    expect(req(p, 'submit')).toMatchObject({ task_id: id, content: '', attachments: [A.id] });
    expect(last().messages[0]).toMatchObject({ role: 'user', content: '', attachments: [A] });
    // Its conversation is called after the file, as the server will call it.
    expect(client.conversations[0]).toMatchObject({ id: client.conversationId, title: 'notes.txt' });
  });

  it('regenerates and edits a turn with files: the new version sends the same files', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    const { p, client, started, last } = setup(storage);
    p.socket.open();
    const base = { conversation_id: 'c1', created_at: '2025-01-01T00:00:00Z', task_id: 'tA', parent_task_id: null };
    answerHistory(p, [
      { ...base, id: 'u1', role: 'user', content: '', status: null, attachments: [A, B] },
      { ...base, id: 'a1', role: 'assistant', content: 'notes.txt 12 …', status: 'done', attachments: [] },
    ]);
    await started;
    const shown = last().messages;
    expect(shown[0]).toMatchObject({ canEdit: true, attachments: [A, B] });
    expect(shown[1]).toMatchObject({ canRegenerate: true });

    const regen = client.regenerate('tA');
    expect(req(p, 'submit')).toMatchObject({ task_id: regen, content: '', attachments: [A.id, B.id], version_of: 'tA' });
    // The new version shows its files at once.
    expect(last().messages.find((m) => m.task_id === regen && m.role === 'user')).toMatchObject({ content: '', attachments: [A, B] });
    p.socket.push({ type: 'submitted', req: req(p, 'submit').req, created: true, task: mkTask({ id: regen, conversation_id: 'c1', status: 'done', input: '' }) });

    const edited = client.editAndResend('tA', 'now with words');
    expect(req(p, 'submit')).toMatchObject({ task_id: edited, content: 'now with words', attachments: [A.id, B.id], version_of: 'tA' });
    p.socket.push({ type: 'submitted', req: req(p, 'submit').req, created: true, task: mkTask({ id: edited, conversation_id: 'c1', status: 'done', input: 'now with words' }) });

    // An edit may keep some of the files only.
    const fewer = client.editAndResend('tA', 'just the photo', [B]);
    expect(req(p, 'submit')).toMatchObject({ task_id: fewer, content: 'just the photo', attachments: [B.id], version_of: 'tA' });
  });

  it('can retry a failed message of files alone', async () => {
    const storage = new MemoryStorage();
    storage.setItem(StorageKeys.conversation, 'c1');
    storage.setItem(StorageKeys.active, JSON.stringify({ task_id: 'tA', conversation_id: 'c1' }));
    const { p, client, started, last } = setup(storage);
    p.socket.open();
    const base = { conversation_id: 'c1', created_at: '2025-01-01T00:00:00Z', task_id: 'tA' };
    answerHistory(p, [
      { ...base, id: 'u1', role: 'user', content: '', status: null, attachments: [B] },
      { ...base, id: 'a1', role: 'assistant', content: '', status: 'failed', attachments: [] },
    ]);
    await started;
    p.socket.push({ type: 'snapshot', req: req(p, 'subscribe').req, task: mkTask({ id: 'tA', status: 'failed', error: 'demo failure', input: '' }) });
    expect(last().messages[1]).toMatchObject({ canRetry: true });
    client.retry('tA');
    expect(req(p, 'submit')).toMatchObject({ task_id: 'tA', content: '', attachments: [B.id] });
  });
});
