import { describe, expect, it } from 'vitest';
import { closeReason, planReconnect } from '../src/lib/close';

const base = { byClient: false, online: true, immediateUsed: false };

describe('planReconnect', () => {
  it('reconnects at once on 1012 and 1013, first retry only', () => {
    expect(planReconnect({ ...base, code: 1012 }).kind).toBe('now');
    expect(planReconnect({ ...base, code: 1013 }).kind).toBe('now');
    expect(planReconnect({ ...base, code: 1012, immediateUsed: true }).kind).toBe('wait');
    expect(planReconnect({ ...base, code: 1013, immediateUsed: true }).kind).toBe('wait');
  });

  it('backs off on every other close the client did not ask for', () => {
    for (const code of [1000, 1001, 1003, 1006, 1007, 1008, 1009, 1011, 4000]) {
      expect(planReconnect({ ...base, code }).kind).toBe('wait');
    }
  });

  it('stops when the client closed, waits for the network when offline', () => {
    expect(planReconnect({ ...base, code: 1000, byClient: true }).kind).toBe('stop');
    expect(planReconnect({ ...base, code: 1012, online: false }).kind).toBe('offline');
    expect(planReconnect({ ...base, code: 1006, online: false }).kind).toBe('offline');
  });

  it('names the reason', () => {
    expect(closeReason(1012)).toBe('server restarting');
    expect(closeReason(1006)).toBe('connection lost');
    expect(closeReason(4321)).toBe('closed (4321)');
  });
});
