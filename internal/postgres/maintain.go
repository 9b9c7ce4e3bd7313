package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// maintenanceBatch bounds the rows one maintenance transaction (or one call,
// for ExpireLeases and Undispatched) handles, so a backlog never becomes one
// huge transaction; callers run maintenance periodically.
const maintenanceBatch = 500

// expirePending fails, in one statement, a batch of the tasks no runner
// claimed within the pending timeout: each gets the failed status with
// no_runner at the seq after its own, its transition and its assistant
// message (with the output it kept, if any). Rows another process has
// locked are passed over.
const expirePending = `
	WITH due AS (
		SELECT id AS due_id FROM tasks
		WHERE status = 'pending' AND updated_at < $1
		ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED),
	f AS (
		UPDATE tasks SET status = 'failed', error = $3, seq = seq + 1, lease_until = NULL,
			finished_at = $4, updated_at = $4
		FROM due WHERE id = due_id
		RETURNING ` + storedColumns + `),
	tr AS (
		INSERT INTO task_transitions (task_id, attempt, from_status, to_status, reason, at)
		SELECT id, attempt, 'pending', 'failed', $3, $4 FROM f),
	m AS (
		UPDATE messages SET content = f.output, status = 'failed'
		FROM f WHERE messages.id = f.assistant_message_id)
	SELECT ` + storedColumns + ` FROM f`

// ExpirePending fails the tasks no runner claimed within the pending timeout
// (no_runner), a batch per statement. Several processes may run it at once:
// each takes the rows the others have not locked.
func (s *Store) ExpirePending(ctx context.Context) (_ []task.Task, err error) {
	defer classify(&err)
	if !allowed(task.StatusPending, task.StatusFailed) {
		return nil, errForbiddenTransition
	}
	now := s.now()
	var expired []task.Task
	for {
		rows, err := s.pool.Query(ctx, expirePending, now.Add(-s.cfg.PendingTimeout), maintenanceBatch,
			task.ErrNoRunner, now)
		if err != nil {
			return expired, fmt.Errorf("expire pending tasks: %w", err)
		}
		batch, err := scanTasks(rows)
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
// outside any transaction since fold reads the event log; then, in one
// transaction for the batch (each task in a savepoint of its own, so one
// task's failure leaves the others' changes), if the row is still that
// attempt at that seq with an expired lease, it becomes cancelled (a cancel
// was requested), pending as a new attempt (attempts left) or failed with
// runner_lost. Its status event gets the seq after the folded one. A task
// fold fails for is left for the next round and its error returned with the
// tasks that were changed.
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
		ready   []taskRow
		folds   []task.Task
		stuck   []taskRow
	)
	for _, r := range due {
		folded, err := foldLease(ctx, r, fold)
		if err != nil {
			errs = append(errs, fmt.Errorf("expire lease of task %s attempt %d: %w", r.ID, r.Attempt, err))
			continue
		}
		ready, folds = append(ready, r), append(folds, folded)
	}
	if len(ready) > 0 {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for i, r := range ready {
				var (
					t  task.Task
					ok bool
				)
				err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
					var err error
					t, ok, err = s.expireLease(ctx, sp, r, folds[i], now)
					return err
				})
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("expire lease of task %s attempt %d: %w", r.ID, r.Attempt, err))
				case ok:
					changed = append(changed, t)
				default:
					stuck = append(stuck, r)
				}
			}
			return nil
		})
		if err != nil {
			return nil, errors.Join(append(errs, fmt.Errorf("expire leases: %w", err))...)
		}
	}
	for _, r := range stuck {
		if n, err := s.endStuckSessions(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("expire lease of task %s attempt %d: %w", r.ID, r.Attempt, err))
		} else if n > 0 {
			errs = append(errs, fmt.Errorf("expire lease of task %s attempt %d: ended %d session(s) of lost runner %q that held the task: %w",
				r.ID, r.Attempt, n, r.RunnerID, errStuckSessions))
		}
	}
	return changed, errors.Join(errs...)
}

// foldLease brings a task whose lease expired up to date with fold (nil:
// the stored snapshot is used) and checks what fold returned.
func foldLease(ctx context.Context, r taskRow, fold task.Fold) (task.Task, error) {
	if fold == nil {
		return r.Task, nil
	}
	folded, err := fold(ctx, r.Task)
	if err != nil {
		return task.Task{}, fmt.Errorf("fold events: %w", err)
	}
	if folded.Attempt != r.Attempt || folded.Seq < r.Seq || !isText(folded.Output) ||
		folded.Progress < 0 || folded.Progress > 100 {
		return task.Task{}, fmt.Errorf("fold returned attempt %d seq %d from attempt %d seq %d",
			folded.Attempt, folded.Seq, r.Attempt, r.Seq)
	}
	return folded, nil
}

// expireLease hands over one task of ExpireLeases in tx; ok is false when
// the task changed since it was found, or another process holds its row
// (a lost runner frozen mid-write may: see stuck.go).
func (s *Store) expireLease(ctx context.Context, tx pgx.Tx, r taskRow, folded task.Task, now time.Time) (task.Task, bool, error) {
	cur, err := scanTask(tx.QueryRow(ctx, `
		SELECT `+taskColumns+` FROM tasks
		WHERE id = $1 AND status = 'running' AND attempt = $2 AND seq = $3 AND lease_until < $4
		FOR UPDATE SKIP LOCKED`, r.ID, r.Attempt, r.Seq, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, false, nil
	}
	if err != nil {
		return task.Task{}, false, fmt.Errorf("lock task: %w", err)
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
		return task.Task{}, false, err
	}
	return next.Task, true, nil
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
		RETURNING `+storedColumns,
		r.ID, r.Status, r.Attempt, errText, output, seq, r.Progress, int64(r.StreamPos), now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark failed: %w", err)
	}
	if err := dropChunks(ctx, tx, r.ID); err != nil {
		return taskRow{}, err
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
		RETURNING `+storedColumns,
		r.ID, r.Attempt, r.Output, seq, r.Progress, int64(r.StreamPos), now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark cancelled: %w", err)
	}
	if err := dropChunks(ctx, tx, r.ID); err != nil {
		return taskRow{}, err
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
			runner_id = NULL, lease_until = NULL, redispatched_at = NULL, updated_at = $7
		WHERE id = $1 AND status = 'running' AND attempt = $2
		RETURNING `+taskColumns,
		r.ID, r.Attempt, r.Output, r.Progress, seq, int64(r.StreamPos), now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark pending: %w", err)
	}
	if err := dropChunks(ctx, tx, r.ID); err != nil {
		return taskRow{}, err
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

// Undispatched picks the tasks to dispatch again: pending for longer than
// age and not picked by any process within every. Picking records the time
// (redispatched_at), so however many processes run maintenance, a task
// waiting for a runner is dispatched again by one of them, once per every,
// instead of by each of them every round (a repeat inside JetStream's
// de-duplication window would only be dropped). The oldest come first, at
// most one batch; a duplicate dispatch is harmless, since a claim is
// conditional.
func (s *Store) Undispatched(ctx context.Context, age, every time.Duration) (_ []task.Task, err error) {
	defer classify(&err)
	if age < 0 || every < 0 {
		return nil, task.Errorf(task.CodeInvalid, "age %v or period %v is negative", age, every)
	}
	now := s.now()
	rows, err := s.pool.Query(ctx, `
		UPDATE tasks SET redispatched_at = $1
		WHERE id IN (
			SELECT id FROM tasks
			WHERE status = 'pending' AND updated_at < $2
			  AND (redispatched_at IS NULL OR redispatched_at < $3)
			ORDER BY updated_at LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING `+storedColumns, now, now.Add(-age), now.Add(-every), maintenanceBatch)
	if err != nil {
		return nil, fmt.Errorf("find undispatched tasks: %w", err)
	}
	due, err := scanTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("find undispatched tasks: %w", err)
	}
	slices.SortFunc(due, func(a, b taskRow) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	return tasksOf(due), nil
}

// PurgeLogs hands each task finished more than grace ago whose events are
// still in the log to purge (which removes them: the task's snapshot in
// Postgres is final), a batch at a time, and records the ones purged. The
// rows stay locked meanwhile, so a retry of a failed task waits for its old
// events to go and then logs its new attempt in an empty subject. A failed
// purge is left for the next round and its error returned.
func (s *Store) PurgeLogs(ctx context.Context, grace time.Duration, purge func(ctx context.Context, taskID string) error) (_ int, err error) {
	defer classify(&err)
	if grace < 0 {
		return 0, task.Errorf(task.CodeInvalid, "grace %v is negative", grace)
	}
	cutoff := s.now().Add(-grace)
	total := 0
	for {
		var done, due int
		var errs []error
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `
				SELECT id FROM tasks
				WHERE finished_at < $1 AND NOT log_purged
				ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED`, cutoff, logPurgeBatch)
			if err != nil {
				return fmt.Errorf("find finished tasks: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("find finished tasks: %w", err)
			}
			due = len(ids)
			purged := ids[:0]
			for _, id := range ids {
				if err := purge(ctx, id); err != nil {
					errs = append(errs, fmt.Errorf("purge the log of task %s: %w", id, err))
					continue
				}
				purged = append(purged, id)
			}
			done = len(purged)
			if done == 0 {
				return nil
			}
			_, err = tx.Exec(ctx, `UPDATE tasks SET log_purged = true WHERE id = ANY($1)`, purged)
			if err != nil {
				return fmt.Errorf("record purged logs: %w", err)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("purge logs of finished tasks: %w", err)
		}
		total += done
		if len(errs) > 0 {
			return total, errors.Join(errs...)
		}
		if due < logPurgeBatch {
			return total, nil
		}
	}
}

// logPurgeBatch bounds the rows one PurgeLogs transaction locks; each costs
// a request to NATS.
const logPurgeBatch = 100
