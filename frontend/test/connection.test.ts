import { describe, expect, it } from 'vitest';
import { Connection, type ConnectionState } from '../src/lib/connection';
import { NotConnectedError, TetherError } from '../src/lib/errors';
import type { ServerMessage } from '../src/lib/protocol';
import { FakePlatform } from './fakes';

function setup(opts: { ping?: number } = {}) {
  const p = new FakePlatform();
  const c = new Connection({ url: 'ws://test/v1/ws', platform: p, pingIntervalMs: opts.ping ?? 0 });
  const states: ConnectionState[] = [];
  const msgs: ServerMessage[] = [];
  c.events.on('state', (s) => states.push(s));
  c.events.on('message', (m) => msgs.push(m));
  return { p, c, states, msgs };
}

describe('Connection', () => {
  it('connects and reports open', () => {
    const { p, c, states } = setup();
    c.start();
    expect(c.state).toEqual({ kind: 'connecting', retry: false });
    expect(p.socket.url).toBe('ws://test/v1/ws');
    p.socket.open();
    expect(c.state.kind).toBe('open');
    expect(states.map((s) => s.kind)).toEqual(['connecting', 'open']);
  });

  it('backs off with full jitter after failures: 1s, 2s, 4s ... capped at 30s', () => {
    const { p, c } = setup();
    p.rand = 0.999;
    c.start();
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      p.socket.serverClose(1006);
      expect(c.state.kind).toBe('reconnecting');
      const s = c.state as Extract<ConnectionState, { kind: 'reconnecting' }>;
      delays.push(s.delayMs);
      expect(s.retryAt).toBe(p.now() + s.delayMs);
      p.advance(s.delayMs - 1);
      expect(c.state.kind).toBe('reconnecting');
      p.advance(1);
      expect(c.state).toEqual({ kind: 'connecting', retry: true });
    }
    expect(delays).toEqual([999, 1998, 3996, 7992, 15984, 29970, 29970, 29970]);
    expect(p.sockets).toHaveLength(9);
  });

  it('resets the backoff after a healthy connection, not after a short one', () => {
    const { p, c } = setup();
    p.rand = 0.5;
    c.start();
    p.socket.serverClose(1006); // 500
    p.advance(500);
    p.socket.serverClose(1006); // 1000
    p.advance(1000);
    p.socket.open();
    p.advance(9_000);
    p.socket.serverClose(1006); // short-lived: keeps counting -> 2000
    expect((c.state as { delayMs: number }).delayMs).toBe(2000);
    p.advance(2000);
    p.socket.open();
    p.advance(10_000);
    p.socket.serverClose(1006); // healthy: starts over -> 500
    expect((c.state as { delayMs: number }).delayMs).toBe(500);
  });

  it('reconnects at once on 1012 and 1013, then backs off if that fails', () => {
    for (const code of [1012, 1013]) {
      const { p, c } = setup();
      c.start();
      p.socket.open();
      p.advance(20_000);
      p.socket.serverClose(code);
      expect(c.state).toEqual({ kind: 'connecting', retry: true });
      expect(p.sockets).toHaveLength(2);
      p.socket.serverClose(1006); // gateway still down
      expect(c.state.kind).toBe('reconnecting');
      // and a second 1012 straight after a short connection does not skip the delay
      p.advance(30_000);
      p.socket.open();
      p.socket.serverClose(code);
      expect(c.state.kind).toBe('reconnecting');
    }
  });

  it('waits for the network when offline and reconnects when it returns', () => {
    const { p, c } = setup();
    p.isOnline = false;
    c.start();
    expect(c.state.kind).toBe('offline');
    expect(p.sockets).toHaveLength(0);
    p.setOnline(true);
    expect(c.state.kind).toBe('connecting');
    p.socket.open();
    p.isOnline = false;
    p.socket.serverClose(1006);
    expect(c.state.kind).toBe('offline');
    expect(p.pending()).toEqual([]); // nothing scheduled while offline
    p.setOnline(true);
    expect(c.state.kind).toBe('connecting');
  });

  it('ends an open socket at once when the browser goes offline', () => {
    const { p, c } = setup();
    c.start();
    p.socket.open();
    const first = p.socket;
    p.setOnline(false);
    expect(c.state.kind).toBe('offline');
    expect(first.closedWith).toBe(4000);
    p.setOnline(true);
    expect(c.state.kind).toBe('connecting');
    expect(p.socket).not.toBe(first);
  });

  it('goes offline from a backoff wait, and reconnects at once when the page becomes visible', () => {
    const { p, c } = setup();
    c.start();
    p.socket.serverClose(1006);
    expect(c.state.kind).toBe('reconnecting');
    p.setOnline(false);
    expect(c.state.kind).toBe('offline');
    p.setOnline(true);
    p.socket.serverClose(1006);
    expect(c.state.kind).toBe('reconnecting');
    p.setVisible(false);
    expect(c.state.kind).toBe('reconnecting');
    p.setVisible(true);
    expect(c.state.kind).toBe('connecting');
  });

  it('matches replies by req and hands the rest on in frame order', async () => {
    const { p, c, msgs } = setup();
    c.start();
    p.socket.open();
    const a = c.request({ type: 'history', conversation_id: 'c1' });
    const b = c.request({ type: 'conversations' });
    const [ha, hb] = p.socket.sent;
    expect(ha!.req).not.toBe(hb!.req);
    p.socket.push(
      { type: 'delta', task_id: 't', seq: 1, attempt: 1, text: 'x' },
      { type: 'conversations', req: hb!.req, conversations: [], next: null },
      { type: 'error', req: ha!.req, code: 'not_found', message: 'no such conversation' },
      { type: 'delta', task_id: 't', seq: 2, attempt: 1, text: 'y' },
    );
    await expect(b).resolves.toMatchObject({ type: 'conversations' });
    await expect(a).rejects.toEqual(new TetherError('not_found', 'no such conversation'));
    expect(msgs.map((m) => m.type)).toEqual(['delta', 'delta']);
  });

  it('queues waiting requests until open and resends them after a drop; fails the others', async () => {
    const { p, c } = setup();
    c.start();
    const waiting = c.request({ type: 'conversations' }, { wait: true });
    await expect(c.request({ type: 'ping' })).rejects.toBeInstanceOf(NotConnectedError);
    p.socket.open();
    expect(p.socket.sent.map((m) => m.type)).toEqual(['conversations']);
    const immediate = c.request({ type: 'cancel', task_id: 't' });
    p.socket.serverClose(1006);
    await expect(immediate).rejects.toBeInstanceOf(NotConnectedError);
    p.advance(30_000);
    p.socket.open();
    const again = p.socket.last('conversations');
    expect(again.req).toBeDefined();
    p.socket.push({ type: 'conversations', req: again.req, conversations: [], next: null });
    await expect(waiting).resolves.toMatchObject({ type: 'conversations' });
  });

  it('declares a silent connection dead when a ping gets no pong', () => {
    const { p, c } = setup({ ping: 25_000 });
    c.start();
    p.socket.open();
    p.advance(25_000);
    const ping = p.socket.last('ping');
    p.socket.push({ type: 'pong', req: ping.req });
    p.advance(25_000 + 10_000 - 1);
    expect(c.state.kind).toBe('open');
    p.advance(1);
    expect(c.state.kind).toBe('reconnecting');
    expect(p.sockets[0]!.closedWith).toBe(4000);
  });

  it('gives up on a socket that does not open in time', () => {
    const p = new FakePlatform();
    const c = new Connection({ url: 'ws://x', platform: p, connectTimeoutMs: 5000, pingIntervalMs: 0 });
    c.start();
    p.advance(5000);
    expect(c.state.kind).toBe('reconnecting');
  });

  it('refreshes the session before retrying an attempt that never opened', async () => {
    const p = new FakePlatform();
    let refreshed = 0;
    const c = new Connection({ url: 'ws://x', platform: p, pingIntervalMs: 0, beforeRetry: async () => void refreshed++ });
    c.start();
    p.socket.open();
    p.socket.serverClose(1006); // had opened: no refresh
    p.advance(1000);
    expect(refreshed).toBe(0);
    expect(p.sockets).toHaveLength(2);
    p.socket.serverClose(1006); // never opened: refresh first
    p.advance(2000);
    expect(refreshed).toBe(1);
    await Promise.resolve();
    await Promise.resolve();
    expect(p.sockets).toHaveLength(3);
  });

  it('stops for good', async () => {
    const { p, c } = setup();
    c.start();
    p.socket.open();
    const r = c.request({ type: 'conversations' }, { wait: true });
    c.stop();
    await expect(r).rejects.toBeInstanceOf(NotConnectedError);
    expect(c.state.kind).toBe('idle');
    expect(p.sockets[0]!.closedWith).toBe(1000);
    p.setOnline(true);
    expect(p.sockets).toHaveLength(1);
  });
});
