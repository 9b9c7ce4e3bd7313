export { titleFrom } from './titles';
import { isActive, type Conversation, type ConversationChangedEvent, type TaskInfo } from './protocol';

/** A conversation list entry; `local` until the server has one with that id. */
export interface ConversationItem extends Conversation {
  local?: boolean;
}

/**
 * Merges the first page of conversations into the list: the server's page
 * first (it is newest first and holds every conversation that moved), then
 * whatever older pages had loaded that the page does not hold. Local entries
 * the server does not know yet stay on top.
 */
export function mergeFirstPage(existing: ConversationItem[], page: Conversation[]): ConversationItem[] {
  const ids = new Set(page.map((c) => c.id));
  const locals = existing.filter((c) => c.local && !ids.has(c.id));
  const rest = existing.filter((c) => !c.local && !ids.has(c.id));
  return [...locals, ...dedupe(page), ...rest];
}

/** Appends an older page, skipping conversations already listed. */
export function mergeOlderPage(existing: ConversationItem[], page: Conversation[]): ConversationItem[] {
  const ids = new Set(existing.map((c) => c.id));
  return [...existing, ...dedupe(page).filter((c) => !ids.has(c.id))];
}

/**
 * Applies a `task` event to the list: the conversation's running mark follows
 * the task's status, and a changed conversation moves to the top. `known` is
 * false when the conversation is not listed (the caller reloads the list).
 */
export function applyTask(list: ConversationItem[], t: TaskInfo): { list: ConversationItem[]; known: boolean } {
  const i = list.findIndex((c) => c.id === t.conversation_id);
  if (i === -1) return { list, known: false };
  const c = list[i]!;
  const active_task_id = isActive(t.status) ? t.id : c.active_task_id === t.id ? null : c.active_task_id;
  const moved: ConversationItem = { ...c, active_task_id, updated_at: t.updated_at > c.updated_at ? t.updated_at : c.updated_at };
  return { list: [moved, ...list.slice(0, i), ...list.slice(i + 1)], known: true };
}

/** Puts a conversation at the top with a running task, as a submit in this browser does before any reply. */
export function touchLocal(list: ConversationItem[], id: string, title: string, taskId: string, now: string): ConversationItem[] {
  const i = list.findIndex((c) => c.id === id);
  const c: ConversationItem =
    i === -1 ? { id, title, updated_at: now, active_task_id: taskId, local: true } : { ...list[i]!, active_task_id: taskId, updated_at: now };
  return [c, ...list.filter((x) => x.id !== id)];
}


function dedupe(page: Conversation[]): Conversation[] {
  const seen = new Set<string>();
  return page.filter((c) => (seen.has(c.id) ? false : (seen.add(c.id), true)));
}

/**
 * Applies a `conversation` event (a rename or a delete, here or in another
 * tab or device) to a list: a renamed conversation keeps its place with its
 * new title, a deleted one goes. Returns the list unchanged (the same array)
 * when it does not hold the conversation.
 */
export function applyConversationEvent<T extends Conversation>(list: T[], ev: ConversationChangedEvent): T[] {
  if (ev.action === 'deleted') {
    const rest = list.filter((c) => c.id !== ev.conversation_id);
    return rest.length === list.length ? list : rest;
  }
  const i = list.findIndex((c) => c.id === ev.conversation.id);
  if (i === -1) return list;
  const out = list.slice();
  out[i] = { ...list[i]!, title: ev.conversation.title };
  return out;
}
