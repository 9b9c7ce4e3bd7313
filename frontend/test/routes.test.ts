import { describe, expect, it } from 'vitest';
import { conversationPath, parseRoute, startConversation } from '../src/lib/routes';

const id = '3f2a7c1e-9b4d-4e8a-8c2f-1a2b3c4d5e6f';

describe('parseRoute', () => {
  it('reads / as home', () => {
    expect(parseRoute('/')).toEqual({ kind: 'home' });
    expect(parseRoute('')).toEqual({ kind: 'home' });
    expect(parseRoute('/index.html')).toEqual({ kind: 'home' });
  });
  it('reads /c/<uuid> as that conversation, in lower case, with or without a trailing slash', () => {
    expect(parseRoute(`/c/${id}`)).toEqual({ kind: 'conversation', id });
    expect(parseRoute(`/c/${id}/`)).toEqual({ kind: 'conversation', id });
    expect(parseRoute(`/c/${id.toUpperCase()}`)).toEqual({ kind: 'conversation', id });
    expect(parseRoute(`/c/${encodeURIComponent(id)}`)).toEqual({ kind: 'conversation', id });
  });
  it('names nothing for a non-UUID, an empty id, a deeper path or another path', () => {
    for (const p of ['/c/', '/c', '/c/not-a-uuid', `/c/${id}x`, `/c/x${id}`, `/c/${id}/more`, '/c/%E0%A4%A', '/conversations', '/x/' + id, `//c/${id}`]) {
      expect(parseRoute(p), p).toEqual({ kind: 'unknown' });
    }
  });
  it('round-trips conversationPath', () => {
    expect(conversationPath(id)).toBe(`/c/${id}`);
    expect(parseRoute(conversationPath(id))).toEqual({ kind: 'conversation', id });
  });
});

describe('startConversation', () => {
  const fresh = () => 'fresh';
  it('opens what the URL names, a fresh conversation for a URL that names nothing, and the stored one at /', () => {
    expect(startConversation(`/c/${id}`, fresh)).toBe(id);
    expect(startConversation('/c/nope', fresh)).toBe('fresh');
    expect(startConversation('/elsewhere', fresh)).toBe('fresh');
    expect(startConversation('/', fresh)).toBeUndefined();
  });
});
