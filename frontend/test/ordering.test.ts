import { describe, expect, it } from 'vitest';
import type { StreamEvent, TaskStatus } from '../src/lib/protocol';
import { applyStreamEvent } from '../src/lib/stream';
import cases from '../../internal/task/testdata/ordering.json';
import { mkTask } from './fakes';

interface State {
  attempt: number;
  seq: number;
  status: TaskStatus;
  output: string;
}
interface Case {
  name: string;
  task: State;
  events: { type: 'delta' | 'progress' | 'status'; attempt: number; seq: number; text?: string; progress?: number; status?: TaskStatus; keep?: number }[];
  steps: ('stale' | 'repeat' | 'next' | 'start' | 'gap')[];
  want: State;
}

/** A case's event as the server sends it. */
function streamEvent(e: Case['events'][number]): StreamEvent {
  const base = { task_id: 't1', seq: e.seq, attempt: e.attempt };
  switch (e.type) {
    case 'delta':
      return { ...base, type: 'delta', text: e.text ?? '' };
    case 'progress':
      return { ...base, type: 'progress', progress: e.progress ?? 0 };
    case 'status': {
      const ev: StreamEvent = { ...base, type: 'status', status: e.status ?? 'running', error: null, result_ref: null };
      if (e.keep !== undefined) ev.keep = e.keep;
      return ev;
    }
  }
}

/**
 * The ordering rule exists twice, in Go (task.Task.Apply) and here
 * (applyStreamEvent); internal/task/testdata/ordering.json holds both to the
 * same cases. Go's steps next and start are both "applied" here, a start with
 * the attempt and keep it started.
 */
describe('applyStreamEvent: the ordering cases the server holds itself to (internal/task/testdata/ordering.json)', () => {
  for (const c of cases as Case[]) {
    it(c.name, () => {
      let t = mkTask(c.task);
      const steps: string[] = [];
      for (const e of c.events) {
        const ev = streamEvent(e);
        const r = applyStreamEvent(t, ev);
        if (r.outcome !== 'applied') {
          expect(r.task, 'an event not applied changes nothing').toBe(t);
          steps.push(r.outcome);
        } else if (r.started) {
          expect(r.started).toEqual({ attempt: e.attempt, keep: e.keep ?? 0 });
          steps.push('start');
        } else {
          steps.push('next');
        }
        t = r.task;
      }
      expect(steps).toEqual(c.steps);
      expect({ attempt: t.attempt, seq: t.seq, status: t.status, output: t.output }).toEqual(c.want);
    });
  }
});
