package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Claim makes a pending task running for the runner with a fresh lease. The
// row lock makes concurrent claims, and a claim racing a cancel, take turns:
// only one can find it pending. A running task whose lease expired is not
// claimable here: maintenance hands it over first (ExpireLeases), folding
// what the lost runner logged into the snapshot, so the new attempt keeps
// that prefix instead of starting from a stale one.
func (s *Store) Claim(ctx context.Context, c task.Claim) (_ task.Task, err error) {
	defer classify(&err)
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

// claim is Claim's transaction once the row is locked. The output and
// progress are the attempt's kept prefix (empty for a first attempt or a
// retry) and stay as they are.
func (s *Store) claim(ctx context.Context, tx pgx.Tx, r taskRow, c task.Claim, now time.Time) (taskRow, error) {
	if r.Status != task.StatusPending {
		return taskRow{}, task.ErrNotClaimable
	}
	err := transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt,
		From: task.StatusPending, To: task.StatusRunning, Reason: task.ReasonClaimed, At: now})
	if err != nil {
		return taskRow{}, err
	}
	claimed, err := scanTask(tx.QueryRow(ctx, `
		UPDATE tasks SET status = 'running', runner_id = $3, lease_until = $4,
			seq = greatest(seq, $5) + 1, cancel_requested = false, updated_at = $6
		WHERE id = $1 AND status = 'pending' AND attempt = $2
		RETURNING `+storedColumns,
		r.ID, r.Attempt, c.RunnerID, now.Add(s.cfg.Lease), c.LastSeq, now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark running: %w", err)
	}
	return claimed, nil
}

// Restart starts a running attempt over: the runner's engine cannot continue
// the prefix the attempt kept. The task becomes pending as the next attempt
// with no output and keep 0, and its pending status event (the returned
// task's) is that attempt's first, so every tab clears the kept text. Fenced
// like every runner write: only the attempt's own runner can restart it.
func (s *Store) Restart(ctx context.Context, taskID string, attempt int) (_ task.Task, err error) {
	defer classify(&err)
	id, err := parseID("task id", taskID)
	if err != nil {
		return task.Task{}, err
	}
	now := s.now()
	var restarted taskRow
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := lockTask(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.Status != task.StatusRunning || r.Attempt != attempt {
			return task.ErrFenced
		}
		err = transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt + 1,
			From: task.StatusRunning, To: task.StatusPending, Reason: task.ReasonRestarted, At: now})
		if err != nil {
			return err
		}
		restarted, err = scanTask(tx.QueryRow(ctx, `
			UPDATE tasks SET status = 'pending', attempt = attempt + 1, output = '', keep = 0,
				progress = 0, seq = seq + 1, runner_id = NULL, lease_until = NULL, redispatched_at = NULL,
				updated_at = $3
			WHERE id = $1 AND status = 'running' AND attempt = $2
			RETURNING `+storedColumns, r.ID, attempt, now))
		if err != nil {
			return fmt.Errorf("mark pending: %w", err)
		}
		if err := dropChunks(ctx, tx, r.ID); err != nil {
			return err
		}
		return fillPlaceholder(ctx, tx, r.assistantMessageID, "", task.MessageGenerating)
	})
	if err != nil {
		return task.Task{}, fmt.Errorf("restart task %s attempt %d: %w", id, attempt, err)
	}
	return restarted.Task, nil
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
