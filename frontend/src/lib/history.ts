import type { Attachment, Message } from './protocol';

/**
 * Message lists of a conversation, merged from history pages and local
 * echoes. Pure functions: the client keeps the list, these decide its shape.
 *
 * Order comes from the server (pages are oldest first, and each older page
 * goes in front), never from sorting on the client: rows written in one
 * transaction share a timestamp, and only the server knows their order.
 * Messages are deduplicated by id. A local echo (the user message and the
 * assistant placeholder shown the moment the user presses send) is marked
 * `local` and gives way to the server's message of the same task and role.
 */
export interface ChatMessage extends Message {
  /** Rendered before the server confirmed it. */
  local?: boolean;
}

export function localUserId(taskId: string): string {
  return `local-user-${taskId}`;
}
export function localAssistantId(taskId: string): string {
  return `local-assistant-${taskId}`;
}

/** The user message and assistant placeholder a submit shows at once. */
export function localPair(taskId: string, conversationId: string, content: string, now: string, attachments: Attachment[] = [], parent?: string | null): ChatMessage[] {
  const p = parent === undefined ? {} : { parent_task_id: parent };
  return [
    { id: localUserId(taskId), conversation_id: conversationId, role: 'user', content, task_id: taskId, status: null, created_at: now, local: true, attachments, ...p },
    { id: localAssistantId(taskId), conversation_id: conversationId, role: 'assistant', content: '', task_id: taskId, status: 'generating', created_at: now, local: true, ...p },
  ];
}

function key(m: Message): string {
  return `${m.task_id ?? ''}/${m.role}`;
}

/** Appends local echoes whose server messages are not in the list yet. */
function withLocals(server: ChatMessage[], locals: ChatMessage[]): ChatMessage[] {
  const have = new Set(server.filter((m) => m.task_id).map(key));
  const ids = new Set(server.map((m) => m.id));
  const out = server.slice();
  for (const l of locals) {
    if (!have.has(key(l)) && !ids.has(l.id)) {
      out.push(l);
      have.add(key(l));
      ids.add(l.id);
    }
  }
  return out;
}

export interface NewestMerge {
  messages: ChatMessage[];
  /**
   * The page did not overlap what was loaded (more than a page arrived since),
   * so the list restarted from the page; the caller resets its older cursor to
   * the page's `next`.
   */
  reset: boolean;
}

/** Merges a fresh newest page into the list. */
export function mergeNewest(existing: ChatMessage[], page: Message[]): NewestMerge {
  const server = existing.filter((m) => !m.local);
  const locals = existing.filter((m) => m.local);
  const pageIds = new Set(page.map((m) => m.id));
  const fresh = dedupe(page);
  if (server.length === 0) return { messages: withLocals(fresh, locals), reset: false };
  if (page.length === 0) return { messages: withLocals(server, locals), reset: false };
  const first = server.findIndex((m) => pageIds.has(m.id));
  if (first === -1) return { messages: withLocals(fresh, locals), reset: true };
  const before = server.slice(0, first).filter((m) => !pageIds.has(m.id));
  return { messages: withLocals([...before, ...fresh], locals), reset: false };
}

/** Puts an older page in front of the list, skipping messages already there. */
export function mergeOlder(existing: ChatMessage[], page: Message[]): ChatMessage[] {
  const ids = new Set(existing.map((m) => m.id));
  return [...dedupe(page).filter((m) => !ids.has(m.id)), ...existing];
}

/** Adds local echoes at the end unless their task is already shown. */
export function addLocal(existing: ChatMessage[], locals: ChatMessage[]): ChatMessage[] {
  const server = existing.filter((m) => !m.local);
  const keep = existing.filter((m) => m.local);
  return withLocals(server, [...keep, ...locals]);
}

function dedupe(page: Message[]): ChatMessage[] {
  const seen = new Set<string>();
  const out: ChatMessage[] = [];
  for (const m of page) {
    if (seen.has(m.id)) continue;
    seen.add(m.id);
    out.push(m);
  }
  return out;
}
