package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// maintenanceBatch bounds the rows one maintenance transaction (or one call,
// for ExpireLeases and Undispatched) handles, so a backlog never becomes one
// huge transaction; callers run maintenance periodically.
const maintenanceBatch = 500

// ExpirePending fails the tasks no runner claimed within the pending timeout
// (no_runner). Several processes may run it at once: each takes the rows the
// others have not locked.
func (s *Store) ExpirePending(ctx context.Context) (_ []task.Task, err error) {
	defer classify(&err)
	now := s.now()
	var expired []task.Task
	for {
		var batch []taskRow
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				SELECT `+taskColumns+` FROM tasks
				WHERE status = 'pending' AND updated_at < $1
				ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
				now.Add(-s.cfg.PendingTimeout), maintenanceBatch)
			if err != nil {
				return fmt.Errorf("find pending tasks: %w", err)
			}
			due, err := scanTasks(rows)
			if err != nil {
				return err
			}
			batch = batch[:0]
			for _, r := range due {
				failed, err := failTask(ctx, tx, r, task.ErrNoRunner, r.Output, r.Seq+1, now)
				if err != nil {
					return err
				}
				batch = append(batch, failed)
			}
			return nil
		})
		if err != nil {
			return expired, fmt.Errorf("expire pending tasks: %w", err)
		}
		expired = append(expired, tasksOf(batch)...)
		if len(batch) < maintenanceBatch {
			return expired, nil
		}
	}
}

// ExpireLeases takes running tasks whose runner stopped heart-beating. Each
// is first brought up to date with fold (nil: the stored snapshot is used),
// outside any transaction since fold reads the event log; then, if the row
// is still that attempt at that seq with an expired lease, it becomes
// cancelled (a cancel was requested), pending as a new attempt (attempts
// left) or failed with runner_lost. Its status event gets the seq after the
// folded one. A task fold fails for is left for the next round and its error
// returned with the tasks that were changed.
func (s *Store) ExpireLeases(ctx context.Context, fold task.Fold) (_ []task.Task, err error) {
	defer classify(&err)
	now := s.now()
	rows, err := s.pool.Query(ctx, `
		SELECT `+taskColumns+` FROM tasks
		WHERE status = 'running' AND lease_until < $1
		ORDER BY lease_until LIMIT $2`, now, maintenanceBatch)
	if err != nil {
		return nil, fmt.Errorf("expire leases: find tasks: %w", err)
	}
	due, err := scanTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	var (
		changed []task.Task
		errs    []error
	)
	for _, r := range due {
		t, ok, err := s.expireLease(ctx, r, fold, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("expire lease of task %s attempt %d: %w", r.ID, r.Attempt, err))
			continue
		}
		if ok {
			changed = append(changed, t)
		}
	}
	return changed, errors.Join(errs...)
}

// expireLease handles one task of ExpireLeases; ok is false when the task
// changed (or another process took it) since it was found.
func (s *Store) expireLease(ctx context.Context, r taskRow, fold task.Fold, now time.Time) (t task.Task, ok bool, err error) {
	stuck := false
	folded := r.Task
	if fold != nil {
		if folded, err = fold(ctx, r.Task); err != nil {
			return task.Task{}, false, fmt.Errorf("fold events: %w", err)
		}
		if folded.Attempt != r.Attempt || folded.Seq < r.Seq || !isText(folded.Output) ||
			folded.Progress < 0 || folded.Progress > 100 {
			return task.Task{}, false, fmt.Errorf("fold returned attempt %d seq %d from attempt %d seq %d",
				folded.Attempt, folded.Seq, r.Attempt, r.Seq)
		}
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := scanTask(tx.QueryRow(ctx, `
			SELECT `+taskColumns+` FROM tasks
			WHERE id = $1 AND status = 'running' AND attempt = $2 AND seq = $3 AND lease_until < $4
			FOR UPDATE SKIP LOCKED`, r.ID, r.Attempt, r.Seq, now))
		if errors.Is(err, pgx.ErrNoRows) {
			stuck = true // changed since it was found, or locked (stuck.go)
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock task: %w", err)
		}
		// The folded state is the attempt's true output: store it with the
		// status event that ends or replaces the attempt.
		cur.Output, cur.Progress = folded.Output, max(cur.Progress, folded.Progress)
		cur.StreamPos = max(cur.StreamPos, folded.StreamPos)
		seq := folded.Seq + 1
		var next taskRow
		switch {
		case cur.CancelRequested:
			next, err = cancelLost(ctx, tx, cur, seq, now)
		case cur.attemptsLeft(s.cfg.MaxAttempts):
			next, err = retryLost(ctx, tx, cur, seq, now)
		default:
			next, err = failTask(ctx, tx, cur, task.ErrRunnerLost, cur.Output, seq, now)
		}
		if err != nil {
			return err
		}
		t, ok = next.Task, true
		return nil
	})
	if err == nil && stuck {
		if n, serr := s.endStuckSessions(ctx, r); serr != nil {
			return t, ok, serr
		} else if n > 0 {
			return t, ok, fmt.Errorf("ended %d session(s) of lost runner %q that held the task: %w",
				n, r.RunnerID, errStuckSessions)
		}
	}
	return t, ok, err
}

// failTask moves a pending or running task to failed with errText, the
// attempt's output and the seq of the failed status event.
func failTask(ctx context.Context, tx pgx.Tx, r taskRow, errText, output string, seq int64, now time.Time) (taskRow, error) {
	err := transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt,
		From: r.Status, To: task.StatusFailed, Reason: errText, At: now})
	if err != nil {
		return taskRow{}, err
	}
	failed, err := scanTask(tx.QueryRow(ctx, `
		UPDATE tasks SET status = 'failed', error = $4, output = $5, seq = $6, progress = $7,
			stream_pos = $8, lease_until = NULL, finished_at = $9, updated_at = $9
		WHERE id = $1 AND status = $2 AND attempt = $3
		RETURNING `+taskColumns,
		r.ID, r.Status, r.Attempt, errText, output, seq, r.Progress, int64(r.StreamPos), now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark failed: %w", err)
	}
	if err := fillPlaceholder(ctx, tx, r.assistantMessageID, output, string(task.StatusFailed)); err != nil {
		return taskRow{}, err
	}
	return failed, nil
}

// cancelLost finishes as cancelled a task whose cancel was requested but
// whose runner died before it wrote the cancel.
func cancelLost(ctx context.Context, tx pgx.Tx, r taskRow, seq int64, now time.Time) (taskRow, error) {
	err := transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt,
		From: task.StatusRunning, To: task.StatusCancelled, Reason: task.ReasonCancelled, At: now})
	if err != nil {
		return taskRow{}, err
	}
	cancelled, err := scanTask(tx.QueryRow(ctx, `
		UPDATE tasks SET status = 'cancelled', output = $3, seq = $4, progress = $5,
			stream_pos = $6, lease_until = NULL, finished_at = $7, updated_at = $7
		WHERE id = $1 AND status = 'running' AND attempt = $2
		RETURNING `+taskColumns,
		r.ID, r.Attempt, r.Output, seq, r.Progress, int64(r.StreamPos), now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark cancelled: %w", err)
	}
	err = fillPlaceholder(ctx, tx, r.assistantMessageID, r.Output, string(task.StatusCancelled))
	if err != nil {
		return taskRow{}, err
	}
	return cancelled, nil
}

// retryLost makes a task whose runner died pending again as a new attempt
// that continues the answer: it keeps the folded output of the lost attempt
// (keep = its length in bytes) and its progress; the pending timeout starts
// again. The assistant message stays a generating placeholder.
func retryLost(ctx context.Context, tx pgx.Tx, r taskRow, seq int64, now time.Time) (taskRow, error) {
	err := transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt + 1,
		From: task.StatusRunning, To: task.StatusPending, Reason: task.ReasonLeaseExpired, At: now})
	if err != nil {
		return taskRow{}, err
	}
	pending, err := scanTask(tx.QueryRow(ctx, `
		UPDATE tasks SET status = 'pending', attempt = attempt + 1, output = $3,
			keep = octet_length($3), progress = $4, seq = $5, stream_pos = $6,
			runner_id = NULL, lease_until = NULL, updated_at = $7
		WHERE id = $1 AND status = 'running' AND attempt = $2
		RETURNING `+taskColumns,
		r.ID, r.Attempt, r.Output, r.Progress, seq, int64(r.StreamPos), now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark pending: %w", err)
	}
	return pending, nil
}

// Purge deletes the tasks finished longer than the idempotency TTL ago, with
// their transitions; their messages stay. Their ids can then be submitted
// again as new tasks.
func (s *Store) Purge(ctx context.Context) (_ int64, err error) {
	defer classify(&err)
	cutoff := s.now().Add(-s.cfg.IdempotencyTTL)
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `
			DELETE FROM tasks WHERE id IN (
				SELECT id FROM tasks WHERE finished_at < $1
				LIMIT $2 FOR UPDATE SKIP LOCKED)`, cutoff, maintenanceBatch)
		if err != nil {
			return total, fmt.Errorf("purge finished tasks: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < maintenanceBatch {
			return total, nil
		}
	}
}

// Undispatched lists tasks pending for longer than age (oldest first, at
// most one batch), so their dispatch message can be sent again; a duplicate
// dispatch is harmless, since a claim is conditional.
func (s *Store) Undispatched(ctx context.Context, age time.Duration) (_ []task.Task, err error) {
	defer classify(&err)
	if age < 0 {
		return nil, task.Errorf(task.CodeInvalid, "age %v is negative", age)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+taskColumns+` FROM tasks
		WHERE status = 'pending' AND updated_at < $1
		ORDER BY updated_at LIMIT $2`, s.now().Add(-age), maintenanceBatch)
	if err != nil {
		return nil, fmt.Errorf("find undispatched tasks: %w", err)
	}
	due, err := scanTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("find undispatched tasks: %w", err)
	}
	return tasksOf(due), nil
}
