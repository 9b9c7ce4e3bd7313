import type { StreamEvent, Task } from './protocol';

/** What applying one stream event did. */
export type EventOutcome = 'applied' | 'repeat' | 'gap';

export interface Applied {
  task: Task;
  outcome: EventOutcome;
}

/**
 * Folds one stream event into a task snapshot, exactly as PROTOCOL.md section 2
 * defines a snapshot (and as internal/task's Task.Apply does on the server).
 * An event at or below the snapshot's seq is a repeat and changes nothing; one
 * that skips a number is a gap: the snapshot is left as it is and the caller
 * resubscribes for a fresh one, never skipping silently. A status event of a
 * newer attempt clears the output: the new attempt starts from nothing.
 */
export function applyStreamEvent(t: Task, ev: StreamEvent): Applied {
  if (ev.seq <= t.seq) return { task: t, outcome: 'repeat' };
  if (ev.seq !== t.seq + 1) return { task: t, outcome: 'gap' };
  const next: Task = { ...t, seq: ev.seq };
  switch (ev.type) {
    case 'delta':
      next.output = t.output + ev.text;
      break;
    case 'progress':
      next.progress = ev.progress;
      break;
    case 'status':
      if (ev.attempt > t.attempt) {
        next.output = '';
        next.progress = 0;
      }
      next.status = ev.status;
      next.attempt = ev.attempt;
      next.error = ev.error;
      next.result_ref = ev.result_ref;
      break;
  }
  return { task: next, outcome: 'applied' };
}

/**
 * Chooses between the snapshot a tab holds and one the server just sent. The
 * server's is taken unless it is older than what the tab already shows (a
 * gateway may answer from a Postgres snapshot that lags the live stream): then
 * the tab keeps its own, and the events that follow bring both to the same
 * place because repeats are ignored. Either way the text on screen never
 * shrinks within an attempt, and the progress bar never restarts at 0.
 */
export function applySnapshot(current: Task | undefined, snap: Task): Task {
  if (!current) return snap;
  if (snap.attempt < current.attempt) return current;
  if (snap.attempt === current.attempt && snap.seq < current.seq) return current;
  return snap;
}
