/**
 * Versions of turns (docs/protocol.md, "Versions"). A turn is a task's user
 * message and its answer; each names the turn it follows (parent_task_id),
 * and turns that follow the same turn are versions of one another, in the
 * order the server wrote them. A conversation is a tree of turns and the
 * page shows one path through it: at each turn the version chosen in this
 * tab, else the newest. Pure functions over the messages in server order.
 */

/** The parent key of turns whose parent is not loaded (or that are first). */
export const ROOT = '';

export interface TurnMessage {
  role: 'user' | 'assistant';
  task_id: string | null;
  /** The turn this one follows: null for a first turn; undefined when the server did not say (older servers). */
  parent_task_id?: string | null;
}

/** Where a shown turn stands among its versions. */
export interface VersionInfo {
  /** 1-based. */
  index: number;
  count: number;
  /** The task ids of the version before and after it, if any. */
  prev: string | null;
  next: string | null;
}

interface Turn {
  id: string;
  parentKey: string;
  order: number;
}

/**
 * The turns of a message list in order, each with the key of the turn it
 * follows: its parent when that turn is loaded, else ROOT (the first turn,
 * or one whose parent is on a page not loaded yet). A turn the server gave
 * no parent for (an older server) follows the turn before it.
 */
export function turnsOf(messages: readonly TurnMessage[]): Turn[] {
  const turns: Turn[] = [];
  const seen = new Map<string, Turn>();
  const declared = new Map<string, string | null | undefined>();
  for (const m of messages) {
    if (!m.task_id) continue;
    if (!seen.has(m.task_id)) {
      const t: Turn = { id: m.task_id, parentKey: ROOT, order: turns.length };
      seen.set(m.task_id, t);
      turns.push(t);
    }
    if (m.parent_task_id !== undefined && !declared.has(m.task_id)) declared.set(m.task_id, m.parent_task_id);
  }
  for (let i = 0; i < turns.length; i++) {
    const t = turns[i]!;
    const p = declared.has(t.id) ? declared.get(t.id) : i > 0 ? turns[i - 1]!.id : null;
    t.parentKey = p && seen.has(p) && p !== t.id ? p : ROOT;
  }
  return turns;
}

/**
 * The path of turns to show and where each stands among its versions:
 * from the root, at each step the chosen child (by parent key) if it is one
 * of them, else the newest.
 */
export function pickPath(messages: readonly TurnMessage[], chosen: ReadonlyMap<string, string>): { path: string[]; versions: Map<string, VersionInfo> } {
  const turns = turnsOf(messages);
  const children = new Map<string, Turn[]>();
  for (const t of turns) {
    const list = children.get(t.parentKey) ?? [];
    list.push(t);
    children.set(t.parentKey, list);
  }
  const path: string[] = [];
  const versions = new Map<string, VersionInfo>();
  const visited = new Set<string>();
  let key = ROOT;
  for (;;) {
    const siblings = children.get(key);
    if (!siblings || siblings.length === 0) break;
    const want = chosen.get(key);
    let i = siblings.length - 1;
    if (want !== undefined) {
      const j = siblings.findIndex((s) => s.id === want);
      if (j >= 0) i = j;
    }
    const pick = siblings[i]!;
    if (visited.has(pick.id)) break;
    visited.add(pick.id);
    path.push(pick.id);
    versions.set(pick.id, {
      index: i + 1,
      count: siblings.length,
      prev: i > 0 ? siblings[i - 1]!.id : null,
      next: i < siblings.length - 1 ? siblings[i + 1]!.id : null,
    });
    key = pick.id;
  }
  return { path, versions };
}

/** The parent key of a turn in a message list (to record a choice of version). */
export function parentKeyOf(messages: readonly TurnMessage[], taskId: string): string {
  return turnsOf(messages).find((t) => t.id === taskId)?.parentKey ?? ROOT;
}

/** The last turn of the path shown, and the newest turn written: a new message follows the former. */
export function leafAndNewest(messages: readonly TurnMessage[], chosen: ReadonlyMap<string, string>): { leaf: string | null; newest: string | null } {
  const { path } = pickPath(messages, chosen);
  const turns = turnsOf(messages);
  return { leaf: path[path.length - 1] ?? null, newest: turns[turns.length - 1]?.id ?? null };
}
