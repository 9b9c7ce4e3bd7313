package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// spillResult moves a finished output larger than max out of the task row
// into a stored result, in the finishing transaction: the task keeps an
// empty output and names the result in result_ref. The assistant message was
// already filled with the whole text.
func spillResult(ctx context.Context, tx pgx.Tx, r taskRow, max int, now time.Time) (taskRow, error) {
	if max < 0 || len(r.Output) <= max {
		return r, nil
	}
	ref, err := uuid.NewV7()
	if err != nil {
		return taskRow{}, fmt.Errorf("result ref: %w", err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO results (ref, user_id, task_id, content, created_at)
		VALUES ($1, $2, $3, $4, $5)`, ref, r.UserID, r.ID, r.Output, now)
	if err != nil {
		return taskRow{}, fmt.Errorf("store result of task %s: %w", r.ID, err)
	}
	spilled, err := scanTask(tx.QueryRow(ctx, `UPDATE tasks SET output = '', result_ref = $2
		WHERE id = $1 RETURNING `+storedColumns, r.ID, ref.String()))
	if err != nil {
		return taskRow{}, fmt.Errorf("point task %s at its result: %w", r.ID, err)
	}
	return spilled, nil
}

// Result returns the user's stored result; another user's ref answers
// exactly like a missing one.
func (s *Store) Result(ctx context.Context, userID, ref string) (_ task.Result, err error) {
	defer classify(&err)
	id, err := parseID("result ref", ref)
	if err != nil {
		return task.Result{}, err
	}
	if err := checkUser(userID); err != nil {
		return task.Result{}, err
	}
	var res task.Result
	err = s.pool.QueryRow(ctx, `SELECT ref, task_id, content FROM results WHERE ref = $1 AND user_id = $2`,
		id, userID).Scan(&res.Ref, &res.TaskID, &res.Content)
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Result{}, task.Errorf(task.CodeNotFound, "result not found")
	}
	if err != nil {
		return task.Result{}, fmt.Errorf("read result %s: %w", id, err)
	}
	return res, nil
}
