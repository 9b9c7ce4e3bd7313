import { isActive, type StreamEvent, type Task } from './protocol';
import { utf8Prefix } from './utf8';

/**
 * What applying one stream event did:
 * - applied: the task moved on (the next event of its attempt, or the start of a newer attempt);
 * - repeat: an event of the current attempt at or below the task's seq; nothing changed;
 * - stale: an event of an older attempt (a runner that lost its lease and woke up); dropped;
 * - gap: the task cannot take this event without something it missed; nothing
 *   changed, and the caller resubscribes for a fresh snapshot.
 */
export type EventOutcome = 'applied' | 'repeat' | 'stale' | 'gap';

export interface Applied {
  task: Task;
  outcome: EventOutcome;
  /**
   * Set when the event started a newer attempt: `keep` bytes of the output
   * were kept (the answer of a lost runner continues), or 0 (it starts over).
   */
  started?: { attempt: number; keep: number };
}

/**
 * The attempt an event belongs to. Every event of protocol 1.1 carries it; a
 * delta or progress event of a 1.0 server did not, and counts as an event of
 * the attempt the tab holds (1.0 had no continuation, and only its status
 * events could start an attempt).
 */
export function eventAttempt(ev: StreamEvent, t: Task): number {
  return typeof ev.attempt === 'number' ? ev.attempt : t.attempt;
}

/**
 * Folds one stream event into a task snapshot, ordering events by (attempt,
 * seq) as PROTOCOL.md sections 3 and 4 require:
 *
 * - An event of an older attempt is stale: a paused runner that lost its lease
 *   may publish after its successor started, even with seqs the new attempt
 *   also uses. It is dropped, and it is no reason to resubscribe.
 * - Within the attempt the tab holds: at or below its seq is a repeat, seq+1 is
 *   applied, anything further is a gap (the caller resubscribes for a fresh
 *   snapshot, never skipping silently).
 * - A newer attempt can only start with its first event: a `pending` or
 *   `running` status with seq at most seq+1 (it may be lower: stale events of
 *   the old attempt may have taken seqs ahead of the durable ones the new
 *   attempt continues from). It keeps the first `keep` UTF-8 bytes of the
 *   output (absent: 0, the output is cleared). Anything else of a newer attempt
 *   (a delta, a terminal status, a seq beyond seq+1, a `keep` longer than the
 *   output the tab holds or not on a character boundary) means the tab missed
 *   the start: a gap.
 *
 * Progress never moves back on screen: a newer attempt that keeps output keeps
 * the progress shown (the text it continues is the text that progress
 * described), one that starts over starts at 0; progress events are taken as
 * they come but never lower the value (within an attempt the server never
 * lowers it, so this only holds the bar still while a continued attempt's
 * engine catches up with the kept text).
 *
 * The rule is the Go one of task.Position.Step and Task.Apply; both are
 * tested on the same cases, internal/task/testdata/ordering.json.
 */
export function applyStreamEvent(t: Task, ev: StreamEvent): Applied {
  const attempt = eventAttempt(ev, t);
  if (attempt < t.attempt) return { task: t, outcome: 'stale' };
  if (attempt > t.attempt) return startAttempt(t, ev, attempt);
  if (ev.seq <= t.seq) return { task: t, outcome: 'repeat' };
  if (ev.seq !== t.seq + 1) return { task: t, outcome: 'gap' };
  const next: Task = { ...t, seq: ev.seq };
  switch (ev.type) {
    case 'delta':
      next.output = t.output + ev.text;
      break;
    case 'progress':
      next.progress = Math.max(t.progress, ev.progress);
      break;
    case 'status':
      // A `keep` on a status of the attempt already held changes nothing: it
      // was applied when the attempt started, and deltas may have followed.
      next.status = ev.status;
      next.error = ev.error;
      next.result_ref = ev.result_ref;
      break;
  }
  return { task: next, outcome: 'applied' };
}

/** The first event of a newer attempt, or a sign that the tab missed it (see applyStreamEvent). */
function startAttempt(t: Task, ev: StreamEvent, attempt: number): Applied {
  const gap: Applied = { task: t, outcome: 'gap' };
  if (ev.type !== 'status' || !isActive(ev.status) || ev.seq > t.seq + 1) return gap;
  const keep = ev.keep ?? 0;
  if (!Number.isSafeInteger(keep) || keep < 0) return gap;
  const output = utf8Prefix(t.output, keep);
  if (output === undefined) return gap;
  const task: Task = {
    ...t,
    seq: ev.seq,
    attempt,
    status: ev.status,
    error: ev.error,
    result_ref: ev.result_ref,
    output,
    progress: keep === 0 ? 0 : t.progress,
  };
  return { task, outcome: 'applied', started: { attempt, keep } };
}

/**
 * Chooses between the snapshot a tab holds and one the server just sent,
 * ordering them by (attempt, seq). The server's is taken unless it is older
 * than what the tab already shows (a gateway may answer from a Postgres
 * snapshot that lags the live stream): then the tab keeps its own, and the
 * events that follow bring both to the same place because repeats are
 * ignored. Either way the text on screen never shrinks within an attempt, and
 * the progress bar never moves back within one (a continued attempt's
 * snapshot may count less progress than the tab carried over into it).
 */
export function applySnapshot(current: Task | undefined, snap: Task): Task {
  if (!current) return snap;
  if (snap.attempt < current.attempt) return current;
  if (snap.attempt === current.attempt && snap.seq < current.seq) return current;
  if (snap.attempt === current.attempt && snap.progress < current.progress) return { ...snap, progress: current.progress };
  return snap;
}
