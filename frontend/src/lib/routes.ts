/**
 * The UI's addresses: `/` is a new chat (or, on a fresh load, the
 * conversation the tab had open), `/c/<id>` one conversation. Anything else
 * (`/c/` with no id or one that is not a UUID, another path) names nothing
 * and is shown as not found, never as some other conversation.
 */
export type Route = { kind: 'home' } | { kind: 'conversation'; id: string } | { kind: 'unknown' };

const uuidRe = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What a location's path names. Ids are UUIDs; they are compared in lower case, as the server writes them. */
export function parseRoute(pathname: string): Route {
  if (pathname === '/' || pathname === '' || pathname === '/index.html') return { kind: 'home' };
  const m = /^\/c\/([^/]*)\/?$/.exec(pathname);
  if (!m) return { kind: 'unknown' };
  let id: string;
  try {
    id = decodeURIComponent(m[1]!);
  } catch {
    return { kind: 'unknown' };
  }
  return uuidRe.test(id) ? { kind: 'conversation', id: id.toLowerCase() } : { kind: 'unknown' };
}

/** The path of a conversation. */
export function conversationPath(id: string): string {
  return `/c/${encodeURIComponent(id)}`;
}

/**
 * The conversation a page loaded at pathname starts on (client.start): the
 * one the URL names; a fresh one when it names nothing (shown as not found,
 * so no other conversation shows under it); at `/` none, so the client opens
 * the stored one.
 */
export function startConversation(pathname: string, fresh: () => string): string | undefined {
  const r = parseRoute(pathname);
  return r.kind === 'conversation' ? r.id : r.kind === 'unknown' ? fresh() : undefined;
}
