package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Cancel cancels the user's task: a pending one right here, a running one by
// recording the request for the runner that holds it (which writes the
// cancelled status itself, as the task's one writer), a finished one not at
// all. The row lock makes a cancel and a runner's claim or finish take turns:
// whichever commits first wins and the other sees its result.
func (s *Store) Cancel(ctx context.Context, userID, taskID string) (_ task.CancelResult, err error) {
	defer classify(&err)
	id, err := parseID("task id", taskID)
	if err != nil {
		return task.CancelResult{}, err
	}
	if err := checkUser(userID); err != nil {
		return task.CancelResult{}, err
	}
	var res task.CancelResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := scanTask(tx.QueryRow(ctx,
			`SELECT `+taskColumns+` FROM tasks WHERE id = $1 AND user_id = $2 FOR UPDATE`, id, userID))
		if errors.Is(err, pgx.ErrNoRows) {
			return errTaskNotFound()
		}
		if err != nil {
			return fmt.Errorf("read task: %w", err)
		}
		res, err = cancel(ctx, tx, r, s.now())
		return err
	})
	if err != nil {
		return task.CancelResult{}, fmt.Errorf("cancel task %s: %w", id, err)
	}
	return res, nil
}

// cancel is Cancel's transaction once the row is locked.
func cancel(ctx context.Context, tx pgx.Tx, r taskRow, now time.Time) (task.CancelResult, error) {
	switch r.Status {
	case task.StatusPending:
		err := transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt,
			From: task.StatusPending, To: task.StatusCancelled, Reason: task.ReasonCancelled, At: now})
		if err != nil {
			return task.CancelResult{}, err
		}
		cancelled, err := scanTask(tx.QueryRow(ctx, `
			UPDATE tasks SET status = 'cancelled', seq = seq + 1, finished_at = $2, updated_at = $2
			WHERE id = $1 AND status = 'pending'
			RETURNING `+taskColumns, r.ID, now))
		if err != nil {
			return task.CancelResult{}, fmt.Errorf("cancel pending task: %w", err)
		}
		err = fillPlaceholder(ctx, tx, r.assistantMessageID, cancelled.Output, string(task.StatusCancelled))
		if err != nil {
			return task.CancelResult{}, err
		}
		return task.CancelResult{Task: cancelled.Task, Cancelled: true}, nil
	case task.StatusRunning:
		if r.CancelRequested {
			return task.CancelResult{Task: r.Task, Requested: true}, nil
		}
		requested, err := scanTask(tx.QueryRow(ctx, `
			UPDATE tasks SET cancel_requested = true, updated_at = $2
			WHERE id = $1 AND status = 'running'
			RETURNING `+taskColumns, r.ID, now))
		if err != nil {
			return task.CancelResult{}, fmt.Errorf("request cancel of running task: %w", err)
		}
		return task.CancelResult{Task: requested.Task, Requested: true}, nil
	default:
		return task.CancelResult{Task: r.Task}, nil
	}
}
