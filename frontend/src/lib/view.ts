import type { ChatMessage } from './history';
import { isTerminal, type Attachment, type MessageStatus, type Role, type Task, type TaskStatus } from './protocol';
import { pickPath, type VersionInfo } from './versions';

/** What a tab knows about one task beyond the message list. */
export interface TaskState {
  id: string;
  conversation_id: string;
  /** The user's text, kept for a retry with the same id. */
  content: string | undefined;
  /** The uploads the submit attached, kept for a retry with the same id (part of its identity). */
  attachments?: Attachment[];
  /** The latest snapshot, with every stream event applied since. */
  task: Task | undefined;
  /** A submit (or retry) sent but not yet confirmed. */
  sending: boolean;
  /** A cancel was asked for (here or in another tab) and the task has not ended yet. */
  cancelling: boolean;
  /** The server refused the submit; `retryable` says whether the same submit may be tried again. */
  localError: { code: string; message: string; retryable: boolean } | undefined;
  /**
   * The attempt that, as this tab saw it start on the live stream, continued
   * the answer of a lost runner (its first status event kept output). A
   * snapshot does not say how its attempt began, so a tab that loads the task
   * later (a reload, another device) does not know it, and shows no note.
   */
  resumedAttempt: number | undefined;
  /** A stop was asked for and the server answered that the task had ended first. */
  finishedFirst?: boolean;
}

/** A message as the UI shows it: the history row with the live task folded in. */
export interface ViewMessage {
  id: string;
  role: Role;
  content: string;
  task_id: string | null;
  /** null for user messages. */
  status: MessageStatus | null;
  created_at: string;
  /** Not confirmed by the server yet. */
  local: boolean;
  /** 0..100 while generating once a snapshot is known; null when unknown (or not generating). */
  progress: number | null;
  /** The task's error (failed), or why the submit was refused (the server's message). */
  error: string | null;
  /** The code of a refused submit or subscribe; null for a task's own error. */
  errorCode: string | null;
  /** A stop was pressed but the answer had ended before it reached the server. */
  finishedFirst: boolean;
  attempt: number | null;
  /** The current attempt continues an answer whose runner was lost (see TaskState.resumedAttempt). */
  resumed: boolean;
  /** The submit waits for the server (or for the connection). */
  sending: boolean;
  cancelling: boolean;
  canCancel: boolean;
  canRetry: boolean;
  result_ref: string | null;
  /** The files a user message carries ([] for answers). */
  attachments: Attachment[];
  /** The turn this one follows, as the server (or the submit) said; undefined when unknown. */
  parent_task_id?: string | null;
  /** Where this turn stands among its versions (set on the messages of a turn shown with others). */
  versions: VersionInfo | null;
  /** The answer can be generated again as a new version (it is finished and nothing else runs). */
  canRegenerate: boolean;
  /** The message can be edited and sent again as a new version. */
  canEdit: boolean;
}

export function messageStatus(s: TaskStatus): MessageStatus {
  return s === 'pending' || s === 'running' ? 'generating' : s;
}

/**
 * Folds task states into a conversation's messages. The live task wins over
 * the history row (history holds an empty placeholder while a task runs), so
 * text generated before a reload reappears from the snapshot. A retry is
 * offered only for a failed task whose text is known and only when nothing
 * else in the conversation is generating; a cancel only while generating.
 */
export function buildMessages(messages: ChatMessage[], tasks: ReadonlyMap<string, TaskState>): ViewMessage[] {
  const inputs = new Map<string, string>();
  for (const m of messages) if (m.role === 'user' && m.task_id) inputs.set(m.task_id, m.content);

  const out: ViewMessage[] = messages.map((m) => {
    const s = m.task_id ? tasks.get(m.task_id) : undefined;
    const v: ViewMessage = {
      id: m.id,
      role: m.role,
      content: m.content,
      task_id: m.task_id,
      status: m.role === 'assistant' ? m.status : null,
      created_at: m.created_at,
      local: !!m.local,
      progress: null,
      error: null,
      errorCode: null,
      finishedFirst: !!s?.finishedFirst,
      attempt: null,
      resumed: false,
      sending: false,
      cancelling: false,
      canCancel: false,
      canRetry: false,
      result_ref: null,
      attachments: m.attachments ?? (m.role === 'user' ? (s?.attachments ?? []) : []),
      ...(m.parent_task_id !== undefined ? { parent_task_id: m.parent_task_id } : {}),
      versions: null,
      canRegenerate: false,
      canEdit: false,
    };
    if (m.role !== 'assistant') {
      v.sending = !!m.local && (s ? s.sending : true);
      return v;
    }
    const t = s?.task;
    if (s?.localError) {
      v.status = 'failed';
      v.error = s.localError.message;
      v.errorCode = s.localError.code;
      v.content = t ? t.output : '';
    } else if (s?.sending && !t) {
      v.status = 'generating';
      v.content = '';
      v.sending = true;
    } else if (t) {
      v.status = messageStatus(t.status);
      // The snapshot's output is the text; a finished row in history may hold it when the
      // snapshot came without (a task event), so take whichever is there.
      v.content = t.output !== '' || !isTerminal(t.status) ? t.output : m.content;
      v.error = t.error;
      v.attempt = t.attempt;
      v.resumed = s?.resumedAttempt === t.attempt;
      v.result_ref = t.result_ref;
      if (v.status === 'generating') v.progress = t.progress;
    }
    if (v.status === 'generating') {
      v.cancelling = !!s?.cancelling;
      v.canCancel = !v.cancelling;
    }
    return v;
  });

  const busy = out.some((v) => v.status === 'generating');
  for (const v of out) {
    if (v.status !== 'failed' || !v.task_id || busy) continue;
    const s = tasks.get(v.task_id);
    if (s?.localError && !s.localError.retryable) continue;
    // A message of files alone has the empty text: it can be sent again too.
    v.canRetry = (s?.content ?? inputs.get(v.task_id) ?? s?.task?.input) !== undefined;
  }
  return out;
}

/**
 * The messages of the path of turns to show (the version chosen at each
 * turn, else the newest), each with where its turn stands among its
 * versions, and whether it can be regenerated or edited: only finished
 * turns of the path (with or without files: a version sends its turn's
 * files again), and not while any answer of the conversation is in
 * progress.
 */
export function showPath(all: ViewMessage[], chosen: ReadonlyMap<string, string>): ViewMessage[] {
  const { path, versions } = pickPath(all, chosen);
  const on = new Set(path);
  const busy = all.some((m) => m.status === 'generating');
  return all
    .filter((m) => !m.task_id || on.has(m.task_id))
    .map((m) => {
      if (!m.task_id) return m;
      const v = versions.get(m.task_id) ?? null;
      const settled = !busy && !m.local;
      return {
        ...m,
        versions: v && v.count > 1 ? v : null,
        canRegenerate: settled && m.role === 'assistant' && m.status !== null && m.status !== 'generating',
        canEdit: settled && m.role === 'user',
      };
    });
}

/** A message's identity across its local echo and the server's row: its task and role (else its id). */
export function messageKey(m: { id: string; task_id: string | null; role: Role }): string {
  return m.task_id ? `${m.task_id}/${m.role}` : m.id;
}

/**
 * The messages of a new view, with each one that is the same as in the
 * previous view given back as the previous object: a renderer tells by
 * identity (===) which messages changed and leaves the DOM of the others
 * alone. While an answer streams, that is every message but the answer.
 * prev holds the previous view's messages by messageKey and is updated.
 */
export function keepUnchanged(prev: Map<string, ViewMessage>, next: ViewMessage[]): ViewMessage[] {
  const out = next.map((m) => {
    const old = prev.get(messageKey(m));
    return old && sameMessage(old, m) ? old : m;
  });
  prev.clear();
  for (const m of out) prev.set(messageKey(m), m);
  return out;
}

function sameMessage(a: ViewMessage, b: ViewMessage): boolean {
  const keys = Object.keys(b) as Array<keyof ViewMessage>;
  if (keys.length !== Object.keys(a).length) return false;
  for (const k of keys) {
    const x = a[k];
    const y = b[k];
    if (x === y) continue;
    if (k === 'attachments' && sameAttachments(a.attachments, b.attachments)) continue;
    if (k === 'versions' && a.versions && b.versions && sameVersions(a.versions, b.versions)) continue;
    return false;
  }
  return true;
}

function sameAttachments(a: Attachment[], b: Attachment[]): boolean {
  return a.length === b.length && a.every((x, i) => x.id === b[i]!.id && x.name === b[i]!.name && x.size === b[i]!.size && x.type === b[i]!.type);
}

function sameVersions(a: VersionInfo, b: VersionInfo): boolean {
  return a.index === b.index && a.count === b.count && a.prev === b.prev && a.next === b.next;
}
