package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Heartbeat extends the lease of the runner holding the attempt and tells it
// whether a cancel was requested. A runner whose attempt is no longer the
// running one gets task.ErrFenced and must stop.
func (s *Store) Heartbeat(ctx context.Context, taskID string, attempt int) (_ bool, err error) {
	defer classify(&err)
	id, err := parseID("task id", taskID)
	if err != nil {
		return false, err
	}
	now := s.now()
	var cancelRequested bool
	err = s.pool.QueryRow(ctx, `
		UPDATE tasks SET lease_until = $3
		WHERE id = $1 AND status = 'running' AND attempt = $2
		RETURNING cancel_requested`, id, attempt, now.Add(s.cfg.Lease)).Scan(&cancelRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.whyNotRunning(ctx, id, attempt, -1)
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat task %s attempt %d: %w", id, attempt, err)
	}
	return cancelRequested, nil
}

// whyNotRunning explains a fenced write that changed no row: the task is
// missing, not running at this attempt (task.ErrFenced), or, if fromSeq is
// not negative, at another seq (task.ErrSeqMismatch). Only called after the
// write failed, so the common path is one statement.
func (s *Store) whyNotRunning(ctx context.Context, id string, attempt int, fromSeq int64) error {
	var (
		status task.Status
		cur    int
		seq    int64
	)
	err := s.pool.QueryRow(ctx, `SELECT status, attempt, seq FROM tasks WHERE id = $1`, id).
		Scan(&status, &cur, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return errTaskNotFound()
	}
	if err != nil {
		return fmt.Errorf("read task state: %w", err)
	}
	if status != task.StatusRunning || cur != attempt {
		return task.ErrFenced
	}
	if fromSeq >= 0 && seq != fromSeq {
		return fmt.Errorf("stored seq %d, snapshot from %d: %w", seq, fromSeq, task.ErrSeqMismatch)
	}
	// The row changed between the write and this read; the caller's view
	// is stale either way.
	return task.ErrFenced
}
