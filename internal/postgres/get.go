package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// errTaskNotFound is the answer for a missing task and for another user's.
func errTaskNotFound() error { return task.Errorf(task.CodeNotFound, "task not found") }

// Get returns the user's task; another user's answers exactly like a missing one.
func (s *Store) Get(ctx context.Context, userID, taskID string) (_ task.Task, err error) {
	defer classify(&err)
	id, err := parseID("task id", taskID)
	if err != nil {
		return task.Task{}, err
	}
	if err := checkUser(userID); err != nil {
		return task.Task{}, err
	}
	r, err := scanTask(s.pool.QueryRow(ctx,
		`SELECT `+taskColumns+` FROM tasks WHERE id = $1 AND user_id = $2`, id, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, errTaskNotFound()
	}
	if err != nil {
		return task.Task{}, fmt.Errorf("get task %s: %w", id, err)
	}
	return r.Task, nil
}

// Load returns a task whoever owns it (runner and maintenance side).
func (s *Store) Load(ctx context.Context, taskID string) (_ task.Task, err error) {
	defer classify(&err)
	id, err := parseID("task id", taskID)
	if err != nil {
		return task.Task{}, err
	}
	r, err := scanTask(s.pool.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, errTaskNotFound()
	}
	if err != nil {
		return task.Task{}, fmt.Errorf("load task %s: %w", id, err)
	}
	return r.Task, nil
}
