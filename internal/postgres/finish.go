package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Finish ends the runner's attempt: the last batch, the terminal status, the
// transition and the assistant message, in one transaction, so the history a
// client reads after the terminal status event already holds the answer.
// A cancel committed before it wins: done and failed are then refused with
// task.ErrCancelRequested, and the runner finishes as cancelled instead.
func (s *Store) Finish(ctx context.Context, f task.Finish) (_ task.Task, err error) {
	defer classify(&err)
	id, err := checkFinish(f)
	if err != nil {
		return task.Task{}, err
	}
	now := s.now()
	var finished taskRow
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := lockTask(ctx, tx, id)
		if err != nil {
			return err
		}
		finished, err = finish(ctx, tx, r, f, now)
		if err != nil {
			return err
		}
		finished, err = spillResult(ctx, tx, finished, s.cfg.ResultInlineMax, now)
		return err
	})
	if err != nil {
		return task.Task{}, fmt.Errorf("finish task %s attempt %d as %s: %w", id, f.Attempt, f.Status, err)
	}
	return finished.Task, nil
}

// finish is Finish's transaction once the row is locked.
func finish(ctx context.Context, tx pgx.Tx, r taskRow, f task.Finish, now time.Time) (taskRow, error) {
	switch {
	case r.Status != task.StatusRunning || r.Attempt != f.Attempt:
		return taskRow{}, task.ErrFenced
	case r.Seq != f.FromSeq:
		return taskRow{}, fmt.Errorf("stored seq %d, finish from %d: %w", r.Seq, f.FromSeq, task.ErrSeqMismatch)
	case r.CancelRequested && f.Status != task.StatusCancelled:
		return taskRow{}, task.ErrCancelRequested
	}
	reason := task.ReasonFinished
	switch f.Status {
	case task.StatusFailed:
		reason = task.ReasonEngineFailed
	case task.StatusCancelled:
		reason = task.ReasonCancelled
	}
	err := transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt,
		From: task.StatusRunning, To: f.Status, Reason: reason, At: now})
	if err != nil {
		return taskRow{}, err
	}
	var errText *string
	if f.Status == task.StatusFailed {
		errText = f.Error
	}
	// The attempt's chunks and the last batch go back into output, once.
	finished, err := scanTask(tx.QueryRow(ctx, `
		UPDATE tasks SET status = $3, output = `+foldedOutput+` || $4, seq = $5,
			progress = greatest(progress, $6), stream_pos = $7, error = $8, result_ref = $9,
			lease_until = NULL, finished_at = $10, updated_at = $10
		WHERE id = $1 AND status = 'running' AND attempt = $2
		RETURNING `+storedColumns,
		r.ID, r.Attempt, f.Status, f.Append, f.Seq, f.Progress, int64(f.StreamPos),
		errText, f.ResultRef, now))
	if err != nil {
		return taskRow{}, fmt.Errorf("mark finished: %w", err)
	}
	if err := dropChunks(ctx, tx, r.ID); err != nil {
		return taskRow{}, err
	}
	err = fillPlaceholder(ctx, tx, r.assistantMessageID, finished.Output, string(f.Status))
	if err != nil {
		return taskRow{}, err
	}
	return finished, nil
}

// checkFinish checks a finish before the database is touched.
func checkFinish(f task.Finish) (string, error) {
	id, err := checkSnapshot(f.Snapshot)
	if err != nil {
		return "", err
	}
	if f.Seq == f.FromSeq {
		return "", task.Errorf(task.CodeInvalid, "finish must carry its status event's seq")
	}
	if !f.Status.Terminal() {
		return "", task.Errorf(task.CodeInvalid, "finish status %q is not terminal", f.Status)
	}
	if f.Status == task.StatusFailed && (f.Error == nil || *f.Error == "") {
		return "", task.Errorf(task.CodeInvalid, "a failed task needs an error")
	}
	for _, s := range []*string{f.Error, f.ResultRef} {
		if s != nil && !isText(*s) {
			return "", task.Errorf(task.CodeInvalid, "error and result ref must be UTF-8 text")
		}
	}
	return id, nil
}
