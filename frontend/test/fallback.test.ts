import { describe, expect, it } from 'vitest';
import { TetherClient } from '../src/lib/client';
import { shouldFallBack } from '../src/lib/transport';
import type { FetchLike } from '../src/lib/http';
import { FakePlatform, MemoryStorage, mkTask, seqUUID } from './fakes';

/** Lets promise callbacks (fetch answers, stream reads) run. */
const settle = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await new Promise((r) => setTimeout(r, 0));
};

interface Call {
  method: string;
  path: string;
  lastEventId: string | null;
  body: unknown;
}

/** An SSE answer the test writes to. */
class Stream {
  private ctrl!: ReadableStreamDefaultController<Uint8Array>;
  readonly body = new ReadableStream<Uint8Array>({ start: (c) => void (this.ctrl = c) });
  send(event: string, id: number, data: unknown): void {
    this.ctrl.enqueue(new TextEncoder().encode(`event: ${event}\nid: ${id}\ndata: ${JSON.stringify(data)}\n\n`));
  }
  end(): void {
    this.ctrl.close();
  }
  fail(): void {
    this.ctrl.error(new TypeError('network error'));
  }
}

/** The gateway's HTTP API as the client sees it, answered by the test. */
function fakeServer() {
  const calls: Call[] = [];
  const streams: Stream[] = [];
  let down = false;
  const json = (status: number, v: unknown) => new Response(status === 204 ? null : JSON.stringify(v), { status, headers: { 'Content-Type': 'application/json' } });
  const fetch: FetchLike = async (input, init) => {
    const path = input;
    const headers = new Headers(init?.headers);
    calls.push({ method: init?.method ?? 'GET', path, lastEventId: headers.get('Last-Event-ID'), body: init?.body ? JSON.parse(String(init.body)) : undefined });
    if (down) throw new TypeError('Failed to fetch');
    if (path.startsWith('/v1/conversations?')) return json(200, { conversations: [], next: null });
    if (/^\/v1\/conversations\/[^/]+\/messages/.test(path)) return json(200, { messages: [], next: null });
    if (path === '/v1/tasks' && init?.method === 'POST') {
      const b = JSON.parse(String(init.body)) as { task_id: string; conversation_id: string; content: string };
      return json(201, mkTask({ id: b.task_id, conversation_id: b.conversation_id, input: b.content, status: 'pending', seq: 0 }));
    }
    if (/^\/v1\/tasks\/[^/]+\/events$/.test(path)) {
      if (headers.get('Last-Event-ID') === 'done') return json(204, null);
      const s = new Stream();
      streams.push(s);
      return new Response(s.body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
    }
    return json(404, { error: { code: 'not_found', message: 'no such endpoint' } });
  };
  return {
    fetch,
    calls,
    streams,
    setDown: (v: boolean) => (down = v),
  };
}

function setup() {
  const p = new FakePlatform();
  const server = fakeServer();
  const storage = new MemoryStorage();
  storage.setItem('tether.v1.conversation', 'c1');
  const client = new TetherClient({ platform: p, storage, channel: null, uuid: seqUUID(), url: 'ws://x/v1/ws', fetch: server.fetch, pingIntervalMs: 0 });
  const started = client.start();
  return { p, server, client, started };
}

/** Fails the pending WebSocket attempt before it opens, as a blocked upgrade does, and lets the backoff pass. */
async function failUpgrade(p: FakePlatform): Promise<void> {
  const n = p.sockets.length;
  p.socket.serverClose(1006);
  await settle();
  for (let waited = 0; p.sockets.length === n && waited < 60_000; waited += 500) {
    p.advance(500);
    await settle();
  }
}

describe('the HTTP fallback', () => {
  it('falls back after two failed upgrades while HTTP answers, and never when the server is down', async () => {
    expect(shouldFallBack(1, 2)).toBe(false);
    expect(shouldFallBack(2, 2)).toBe(true);
    const { p, server, client } = setup();
    server.setDown(true);
    for (let i = 0; i < 4; i++) await failUpgrade(p);
    expect(client.connection.transport).toBe('websocket');
    server.setDown(false);
    await failUpgrade(p);
    expect(client.connection.transport).toBe('websocket');
    await failUpgrade(p);
    expect(client.connection.transport).toBe('http');
    expect(client.state).toEqual({ kind: 'open', transport: 'http' });
  });

  it('carries the waiting requests, submits and a followed task over HTTP and SSE, with the same ordering rule', async () => {
    const { p, server, client, started } = setup();
    await failUpgrade(p);
    await failUpgrade(p);
    await started; // the newest history page came over HTTP
    expect(server.calls.some((c) => c.path.startsWith('/v1/conversations/c1/messages'))).toBe(true);
    expect(client.view().loaded).toBe(true);

    const id = client.submit('/stream 3 10');
    await settle();
    const post = server.calls.find((c) => c.method === 'POST' && c.path === '/v1/tasks')!;
    expect(post.body).toEqual({ task_id: id, conversation_id: 'c1', content: '/stream 3 10' });
    // The submitter follows from the task's seq, with Last-Event-ID.
    const follow = server.calls.find((c) => c.path === `/v1/tasks/${id}/events`)!;
    expect(follow.lastEventId).toBe('0');
    const s = server.streams[0]!;
    s.send('status', 1, { type: 'status', task_id: id, seq: 1, attempt: 1, status: 'running', error: null, result_ref: null });
    s.send('delta', 2, { type: 'delta', task_id: id, seq: 2, attempt: 1, text: 't1 ' });
    s.send('delta', 2, { type: 'delta', task_id: id, seq: 2, attempt: 1, text: 't1 ' }); // a repeat
    await settle();
    expect(client.taskState(id)?.task?.output).toBe('t1 ');
    // The stream breaks: it resumes after the last seq it delivered.
    s.fail();
    await settle();
    p.advance(600);
    await settle();
    const resume = server.calls.filter((c) => c.path === `/v1/tasks/${id}/events`)[1]!;
    expect(resume.lastEventId).toBe('2');
    const s2 = server.streams[1]!;
    s2.send('delta', 3, { type: 'delta', task_id: id, seq: 3, attempt: 1, text: 't2 ' });
    // A snapshot the server sends unasked (it could not trust the id) is taken as it is.
    s2.send('snapshot', 5, { type: 'snapshot', task: mkTask({ id, conversation_id: 'c1', status: 'running', seq: 5, output: 't1 t2 t3 ' }) });
    s2.send('status', 6, { type: 'status', task_id: id, seq: 6, attempt: 1, status: 'done', error: null, result_ref: null });
    s2.end();
    await settle();
    expect(client.taskState(id)?.task).toMatchObject({ status: 'done', seq: 6, output: 't1 t2 t3 ' });
  });

  it('goes back to WebSocket as soon as one opens, and re-attaches there', async () => {
    const { p, client } = setup();
    await failUpgrade(p);
    await failUpgrade(p);
    expect(client.connection.transport).toBe('http');
    // The background attempts go on (here at once); one opens.
    client.connection.reconnectNow();
    await settle();
    p.socket.open();
    await settle();
    expect(client.connection.transport).toBe('websocket');
    expect(client.state).toEqual({ kind: 'open', transport: 'websocket' });
    expect(p.socket.ofType('history').length).toBeGreaterThan(0);
  });

  it('a resume of a finished stream (204) ends it quietly', async () => {
    const { p, server, client } = setup();
    await failUpgrade(p);
    await failUpgrade(p);
    const before = server.calls.length;
    client.http.send({ type: 'ping' });
    await settle();
    expect(server.calls.length).toBe(before + 1);
  });
});
