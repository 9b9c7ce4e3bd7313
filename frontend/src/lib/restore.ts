import type { Attachment, Task } from './protocol';

/** A submit written to storage before it was sent, so it can be sent again with the same id. */
export interface PendingSubmit {
  task_id: string;
  conversation_id: string;
  content: string;
  /** Finished uploads it attaches, in order: part of its identity, so a re-send carries the same. */
  attachments?: Attachment[];
  /** Where its turn goes (docs/protocol.md, "Versions"): after this turn, or as another version of that one. */
  parent_task_id?: string;
  version_of?: string;
}

/** What the server said about a stored task id. */
export type Lookup = { kind: 'task'; task: Task } | { kind: 'not_found' };

/** What a tab does with a stored task pointer once the server has answered. */
export type RestoreAction =
  /** pending or running: stay subscribed and continue from the snapshot. */
  | { kind: 'attach'; task: Task }
  /** done: render the final text, then clear the pointer. */
  | { kind: 'show_done'; task: Task }
  /** cancelled: render what was generated, then clear the pointer. */
  | { kind: 'show_cancelled'; task: Task }
  /** failed: show the error and a retry (same id); the pointer stays until the user acts. */
  | { kind: 'show_failed'; task: Task }
  /** unknown to the server but stored as a pending submit: send it again, same id. */
  | { kind: 'resend'; submit: PendingSubmit }
  /** unknown and nothing to re-send: forget it; the user may send again. */
  | { kind: 'clear' };

/**
 * Decides what restore does for one stored task pointer, given the pending
 * submit stored for that id (if any) and the server's answer to `subscribe`.
 *
 * A not-found task with a stored pending submit may never have reached the
 * server (the page went away with the submit in flight), so it is re-sent with
 * the same id: the server's idempotency key makes that safe whether or not the
 * first one arrived. A found task means the submit did arrive, so the stored
 * content is no longer needed (the caller drops it) and, crucially, is never
 * re-sent: a re-sent submit of a failed task would start a new attempt that
 * the user did not ask for.
 */
export function decideRestore(pending: PendingSubmit | undefined, answer: Lookup): RestoreAction {
  if (answer.kind === 'not_found') {
    return pending ? { kind: 'resend', submit: pending } : { kind: 'clear' };
  }
  const task = answer.task;
  switch (task.status) {
    case 'pending':
    case 'running':
      return { kind: 'attach', task };
    case 'done':
      return { kind: 'show_done', task };
    case 'cancelled':
      return { kind: 'show_cancelled', task };
    case 'failed':
      return { kind: 'show_failed', task };
  }
}

/**
 * Whether a stored pointer may be dropped once the action was rendered. A
 * running task keeps it until it ends; a failed one keeps it so a reload
 * still offers the retry.
 */
export function clearsPointer(a: RestoreAction): boolean {
  return a.kind === 'show_done' || a.kind === 'show_cancelled' || a.kind === 'clear';
}
