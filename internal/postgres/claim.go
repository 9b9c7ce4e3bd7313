package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Claim makes a pending task running for the runner, or takes over a
// running one whose lease expired as a new attempt (if the submission has
// attempts left and no cancel waits). The row lock makes concurrent claims,
// and a claim racing a cancel, take turns: only one can find it claimable.
func (s *Store) Claim(ctx context.Context, c task.Claim) (task.Task, error) {
	id, err := parseID("task id", c.TaskID)
	if err != nil {
		return task.Task{}, err
	}
	if err := checkRunner(c.RunnerID); err != nil {
		return task.Task{}, err
	}
	if c.LastSeq < 0 {
		return task.Task{}, task.Errorf(task.CodeInvalid, "last seq is negative")
	}
	now := s.now()
	var claimed taskRow
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := lockTask(ctx, tx, id)
		if err != nil {
			return err
		}
		claimed, err = s.claim(ctx, tx, r, c, now)
		return err
	})
	if err != nil {
		return task.Task{}, fmt.Errorf("claim task %s: %w", id, err)
	}
	return claimed.Task, nil
}

// claim is Claim's transaction once the row is locked.
func (s *Store) claim(ctx context.Context, tx pgx.Tx, r taskRow, c task.Claim, now time.Time) (taskRow, error) {
	attempt := r.Attempt
	switch {
	case r.Status == task.StatusPending:
	case r.Status == task.StatusRunning && r.LeaseUntil.Before(now) &&
		!r.CancelRequested && r.attemptsLeft(s.cfg.MaxAttempts):
		attempt++
		err := transition(ctx, tx, move{TaskID: r.ID, Attempt: attempt,
			From: task.StatusRunning, To: task.StatusPending, Reason: task.ReasonLeaseExpired, At: now})
		if err != nil {
			return taskRow{}, err
		}
	default:
		return taskRow{}, task.ErrNotClaimable
	}
	err := transition(ctx, tx, move{TaskID: r.ID, Attempt: attempt,
		From: task.StatusPending, To: task.StatusRunning, Reason: task.ReasonClaimed, At: now})
	if err != nil {
		return taskRow{}, err
	}
	// A new attempt starts with an empty output; the same attempt (a pending
	// claim) has none yet.
	claimed, err := scanTask(tx.QueryRow(ctx, `
		UPDATE tasks SET status = 'running', attempt = $3, runner_id = $4, lease_until = $5,
			seq = greatest(seq, $6) + 1, output = '', progress = 0, cancel_requested = false,
			updated_at = $7
		WHERE id = $1 AND status = $2 AND attempt = $8
		RETURNING `+taskColumns,
		r.ID, r.Status, attempt, c.RunnerID, now.Add(s.cfg.Lease), c.LastSeq, now, r.Attempt))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark running: %w", err)
	}
	return claimed, nil
}

// lockTask reads a task for update, whoever owns it.
func lockTask(ctx context.Context, tx pgx.Tx, id string) (taskRow, error) {
	r, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return taskRow{}, errTaskNotFound()
	}
	if err != nil {
		return taskRow{}, fmt.Errorf("lock task: %w", err)
	}
	return r, nil
}

// checkRunner checks a runner id: 1..128 bytes of text.
func checkRunner(id string) error {
	if id == "" || len(id) > 128 || !isText(id) {
		return task.Errorf(task.CodeInvalid, "runner id must be 1..128 bytes of text")
	}
	return nil
}
