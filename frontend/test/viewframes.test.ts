import { afterEach, describe, expect, it, vi } from 'vitest';
import { TetherClient, type ConversationView } from '../src/lib/client';
import { browserPlatform } from '../src/lib/platform';
import type { Message, ServerMessage } from '../src/lib/protocol';
import { StorageKeys } from '../src/lib/storage';
import { FakePlatform, MemoryStorage, mkTask, seqUUID } from './fakes';

/** A tab reloaded while task tA of conversation c1 ran, its snapshot in: the answer streams. */
async function streaming() {
  const p = new FakePlatform();
  const storage = new MemoryStorage();
  storage.setItem(StorageKeys.conversation, 'c1');
  storage.setItem(StorageKeys.active, JSON.stringify({ task_id: 'tA', conversation_id: 'c1' }));
  const client = new TetherClient({ platform: p, storage, channel: null, uuid: seqUUID(), url: 'ws://x/v1/ws', pingIntervalMs: 0 });
  const views: ConversationView[] = [];
  client.events.on('view', (v) => views.push(v));
  const started = client.start();
  p.socket.open();
  const history = p.socket.ofType('history')[0]!;
  p.socket.push({ type: 'history', req: history.req, messages: [msg('u1', 'user', 'go'), msg('a1', 'assistant', '', 'generating')], next: null });
  await started;
  const sub = p.socket.ofType('subscribe')[0]!;
  p.socket.push({ type: 'snapshot', req: sub.req, task: mkTask({ id: 'tA', status: 'running', seq: 0, output: '' }) });
  p.frame();
  return { p, client, storage, views, answer: (v: ConversationView) => v.messages.find((m) => m.role === 'assistant')! };
}

function msg(id: string, role: Message['role'], content: string, status: Message['status'] = null): Message {
  return { id, conversation_id: 'c1', role, content, task_id: 'tA', status, created_at: '2025-01-01T00:00:00Z' };
}

/** n deltas of tA from seq from+1, as the gateway coalesces them into one WebSocket frame. */
function deltas(from: number, n: number): { events: ServerMessage[]; text: string } {
  const events: ServerMessage[] = [];
  let text = '';
  for (let i = 1; i <= n; i++) {
    events.push({ type: 'delta', task_id: 'tA', seq: from + i, attempt: 1, text: `t${from + i} ` });
    text += `t${from + i} `;
  }
  return { events, text };
}

describe('the view, once a frame', () => {
  it('sends one view for a WebSocket frame of 200 deltas, with the text exact', async () => {
    const { p, views, answer } = await streaming();
    const before = views.length;
    const { events, text } = deltas(0, 200);
    p.socket.push(...events);
    expect(views.length).toBe(before); // nothing until the frame
    expect(p.framesWaiting).toBe(1); // one frame asked for, not 200
    expect(p.frame()).toBe(1);
    expect(views.length).toBe(before + 1);
    expect(answer(views[views.length - 1]!)).toMatchObject({ content: text, status: 'generating' });
  });

  it('keeps every message but the streaming answer the same object from one view to the next', async () => {
    const { p, views } = await streaming();
    p.socket.push(...deltas(0, 5).events);
    p.frame();
    const a = views[views.length - 1]!;
    p.socket.push(...deltas(5, 5).events);
    p.frame();
    const b = views[views.length - 1]!;
    expect(b.messages[0]).toBe(a.messages[0]); // the question: nothing to draw again
    expect(b.messages[1]).not.toBe(a.messages[1]); // the answer grew
  });

  it('sends one view per frame however the deltas are spread over WebSocket frames', async () => {
    const { p, views, answer } = await streaming();
    const before = views.length;
    let all = '';
    for (let f = 0; f < 5; f++) {
      for (let w = 0; w < 10; w++) {
        const { events, text } = deltas(f * 100 + w * 10, 10);
        p.socket.push(...events);
        all += text;
      }
      p.frame();
      expect(views.length).toBe(before + f + 1);
      expect(answer(views[views.length - 1]!).content).toBe(all);
    }
    // A frame with nothing new sends nothing.
    expect(p.frame()).toBe(0);
    expect(views.length).toBe(before + 5);
  });

  it('loses no view at the end of a task: the last frame has the whole text, done', async () => {
    const { p, client, views, answer } = await streaming();
    const { events, text } = deltas(0, 200);
    p.socket.push(...events, { type: 'status', task_id: 'tA', seq: 201, status: 'done', attempt: 1, error: null, result_ref: null });
    p.frame();
    const last = views[views.length - 1]!;
    expect(answer(last)).toMatchObject({ content: text, status: 'done' });
    expect(last.busy).toBe(false);
    expect(client.pointers.active()).toBeNull();
    expect(p.frame()).toBe(0); // and nothing after it
  });

  it('sends the end that comes in a later frame, after the deltas of an earlier one', async () => {
    const { p, views, answer } = await streaming();
    const { events, text } = deltas(0, 50);
    p.socket.push(...events);
    p.frame();
    p.socket.push({ type: 'status', task_id: 'tA', seq: 51, status: 'done', attempt: 1, error: null, result_ref: null });
    expect(p.framesWaiting).toBe(1);
    p.frame();
    expect(answer(views[views.length - 1]!)).toMatchObject({ content: text, status: 'done' });
  });

  it('builds the view the frame sends from the state then, and view() is current between frames', async () => {
    const { p, client, views, answer } = await streaming();
    p.socket.push(...deltas(0, 3).events);
    expect(answer(client.view()).content).toBe('t1 t2 t3 ');
    client.newConversation();
    p.frame();
    // The frame sends where the tab is now, not the states it passed through.
    expect(views[views.length - 1]).toMatchObject({ id: client.conversationId, messages: [], loaded: true });
  });

  it('drops the view waiting for its frame when the client stops', async () => {
    const { p, client, views } = await streaming();
    p.socket.push(...deltas(0, 3).events);
    client.stop();
    const before = views.length;
    expect(p.framesWaiting).toBe(0);
    p.frame();
    expect(views.length).toBe(before);
  });
});

describe('browserPlatform.requestFrame', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.useRealTimers();
  });

  function stubFrames() {
    const frames = new Map<number, FrameRequestCallback>();
    let next = 1;
    vi.stubGlobal('requestAnimationFrame', (cb: FrameRequestCallback) => {
      frames.set(next, cb);
      return next++;
    });
    vi.stubGlobal('cancelAnimationFrame', (id: number) => frames.delete(id));
    return {
      paint: () => {
        const due = [...frames.values()];
        frames.clear();
        for (const cb of due) cb(0);
      },
      waiting: () => frames.size,
    };
  }

  it('runs once, on the animation frame, and the timer behind it then does nothing', () => {
    vi.useFakeTimers();
    const frames = stubFrames();
    const fn = vi.fn();
    browserPlatform().requestFrame(fn);
    frames.paint();
    expect(fn).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1000);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('runs once from the timer when no frame comes (a hidden tab)', () => {
    vi.useFakeTimers();
    const frames = stubFrames();
    const fn = vi.fn();
    browserPlatform().requestFrame(fn);
    vi.advanceTimersByTime(100);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(frames.waiting()).toBe(0);
    frames.paint();
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('cancels both the frame and the timer', () => {
    vi.useFakeTimers();
    const frames = stubFrames();
    const fn = vi.fn();
    const platform = browserPlatform();
    platform.cancelFrame(platform.requestFrame(fn));
    frames.paint();
    vi.advanceTimersByTime(1000);
    expect(fn).not.toHaveBeenCalled();
  });
});
