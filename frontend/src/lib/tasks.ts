import { Emitter } from './emitter';
import { isTerminal } from './protocol';
import type { TaskState } from './view';

export interface TaskStatesEvents extends Record<string, unknown> {
  /** A task's state changed: the view of its conversation is out of date. */
  change: { id: string; conversation_id: string };
  /** A task was forgotten to keep the map bounded. */
  forgotten: { id: string };
}

/** A task this tab has just heard of: nothing known but its id and conversation. */
export function newTaskState(id: string, conversationId: string): TaskState {
  return { id, conversation_id: conversationId, content: undefined, task: undefined, sending: false, cancelling: false, localError: undefined, resumedAttempt: undefined, finishedFirst: false };
}

/**
 * What the tab knows of each task beyond the message list (view.ts folds it
 * in), bounded: past max, the oldest finished tasks that nothing needs any
 * more are forgotten; history has their messages. The states are plain
 * objects that the parts of the client change in place; whoever changes one
 * says so with changed(), which is what makes the view be built again.
 */
export class TaskStates {
  readonly events = new Emitter<TaskStatesEvents>();
  private readonly map = new Map<string, TaskState>();

  /**
   * needed is asked once per trim for a test of the ids something still
   * needs (followed, shown, named by a stored pointer).
   */
  constructor(
    private readonly max: number,
    private readonly needed: () => (id: string) => boolean,
  ) {}

  get all(): ReadonlyMap<string, TaskState> {
    return this.map;
  }

  get(id: string): TaskState | undefined {
    return this.map.get(id);
  }

  has(id: string): boolean {
    return this.map.has(id);
  }

  delete(id: string): void {
    this.map.delete(id);
  }

  /** Remembers a task, keeping the map bounded. */
  set(s: TaskState): void {
    this.map.set(s.id, s);
    if (this.map.size > this.max) this.trim();
  }

  /** The state of a task, made empty when the tab has not heard of it. */
  of(id: string, conversationId: string): TaskState {
    let s = this.map.get(id);
    if (!s) {
      s = newTaskState(id, conversationId);
      this.set(s);
    }
    return s;
  }

  /** Says that a task's state changed. */
  changed(s: TaskState | undefined): void {
    if (s) this.events.emit('change', { id: s.id, conversation_id: s.conversation_id });
  }

  /** Forgets the oldest tasks that are finished, not sending and not needed. */
  private trim(): void {
    const needed = this.needed();
    for (const [id, s] of this.map) {
      if (this.map.size <= this.max) return;
      if (s.sending || !s.task || !isTerminal(s.task.status) || needed(id)) continue;
      this.map.delete(id);
      this.events.emit('forgotten', { id });
    }
  }
}
