package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
)

// pgTask is a task's row as the checks need it.
type pgTask struct {
	Status   string
	Attempt  int
	Seq      int64
	Output   string
	RunnerID string
}

func (s *system) taskRow(id string) (pgTask, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var r pgTask
	err := s.db.QueryRow(ctx,
		`SELECT status, attempt, seq, output, coalesce(runner_id, '') FROM tasks WHERE id = $1`, id).
		Scan(&r.Status, &r.Attempt, &r.Seq, &r.Output, &r.RunnerID)
	return r, err
}

// waitRow waits until the task's row satisfies cond.
func (s *system) waitRow(id string, timeout time.Duration, what string, cond func(pgTask) bool) (pgTask, error) {
	var last pgTask
	err := eventually.Within(timeout, what, func() (bool, error) {
		r, err := s.taskRow(id)
		if err != nil {
			return false, nil // the row may not be there yet; Postgres is not under test here
		}
		last = r
		return cond(r), nil
	})
	if err != nil {
		return last, fmt.Errorf("%w (last row: status %s attempt %d seq %d runner %q, %d output bytes)",
			err, last.Status, last.Attempt, last.Seq, last.RunnerID, len(last.Output))
	}
	return last, nil
}

// holder waits until the task is running and returns the runner holding
// it now, with the row it read. Called right before a fault, so the fault
// hits whoever holds the task at that moment (a lease may have moved).
func (s *system) holder(t testing.TB, id string) (*runnerProc, pgTask) {
	t.Helper()
	r, row := s.holderOrEnd(t, id)
	if r == nil {
		t.Fatalf("task %s ended (%s, attempt %d) before the harness saw it running: no fault could be injected", id, row.Status, row.Attempt)
	}
	return r, row
}

// holderOrEnd is holder for a task that may be over already (a fast burst):
// a nil runner then, with the finished row.
func (s *system) holderOrEnd(t testing.TB, id string) (*runnerProc, pgTask) {
	t.Helper()
	row, err := s.waitRow(id, 30*time.Second, "the task running", func(r pgTask) bool {
		return (r.Status == "running" && r.RunnerID != "") || isTerminal(r.Status)
	})
	if err != nil {
		t.Fatal(err)
	}
	if isTerminal(row.Status) {
		return nil, row
	}
	r := s.runner(row.RunnerID)
	if r == nil {
		t.Fatalf("task %s is held by %q, which is none of this test's runners", id, row.RunnerID)
	}
	return r, row
}

// messageRow is the assistant message of a task.
func (s *system) messageRow(taskID string) (content, status string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.db.QueryRow(ctx,
		`SELECT content, coalesce(status, '') FROM messages WHERE task_id = $1 AND role = 'assistant'`, taskID).
		Scan(&content, &status)
	return content, status, err
}

// watchSlowQueries samples pg_stat_activity four times a second while the
// system runs and notes every statement that has been running for more
// than half a second, with what it waits on: when a heartbeat times out,
// this tells a lock in Postgres from a starved process. The notes go to the
// test log and the failure summary. The sampler stops when the test ends.
func (s *system) watchSlowQueries(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		seen := map[string]bool{}
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := s.db.Query(ctx, `
				SELECT pid, query_start, coalesce(wait_event_type, ''), coalesce(wait_event, ''),
				       extract(epoch FROM now() - query_start)::float8, left(query, 160)
				FROM pg_stat_activity
				WHERE state = 'active' AND pid <> pg_backend_pid() AND datname = current_database()
				  AND now() - query_start > interval '500 milliseconds'`)
			if err != nil {
				continue
			}
			for rows.Next() {
				var pid int
				var start time.Time
				var wtype, wevent, query string
				var secs float64
				if rows.Scan(&pid, &start, &wtype, &wevent, &secs, &query) != nil {
					continue
				}
				key := fmt.Sprintf("%d/%d", pid, start.UnixNano())
				if seen[key] {
					continue
				}
				seen[key] = true
				s.record(fmt.Sprintf("slow statement: pid %d running %.1fs, waiting on %s/%s: %s", pid, secs, wtype, wevent, query))
			}
			rows.Close()
		}
	}()
}
