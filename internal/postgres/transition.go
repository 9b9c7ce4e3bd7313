package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// errForbiddenTransition: a move the state machine of task.CanTransition
// does not allow. It is a bug in the caller, never a user's error.
var errForbiddenTransition = errors.New("forbidden status transition")

// move is one status change of a task.
type move struct {
	TaskID  string
	Attempt int // the attempt the task has after the move
	From    task.Status
	To      task.Status
	Reason  string
	At      time.Time
}

// transition is the one gate every status change passes: it refuses a move
// task.CanTransition does not allow (From "" is the creation of a task, which
// can only be pending) and records the allowed one in task_transitions.
// The caller updates the task row in the same transaction, conditional on
// From, so the record and the row never disagree.
func transition(ctx context.Context, tx pgx.Tx, m move) error {
	if !allowed(m.From, m.To) {
		return fmt.Errorf("task %s: %q -> %q: %w", m.TaskID, m.From, m.To, errForbiddenTransition)
	}
	var from *task.Status
	if m.From != "" {
		from = &m.From
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO task_transitions (task_id, attempt, from_status, to_status, reason, at)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		m.TaskID, m.Attempt, from, m.To, m.Reason, m.At)
	if err != nil {
		return fmt.Errorf("record transition of task %s %s -> %s: %w", m.TaskID, m.From, m.To, err)
	}
	return nil
}

// allowed is task.CanTransition plus creation.
func allowed(from, to task.Status) bool {
	if from == "" {
		return to == task.StatusPending
	}
	return task.CanTransition(from, to)
}

// fillPlaceholder writes the assistant message of a task: its content so far
// and its status. It is addressed by the message's own id, never by task id.
func fillPlaceholder(ctx context.Context, tx pgx.Tx, messageID, content, status string) error {
	_, err := tx.Exec(ctx, `UPDATE messages SET content = $2, status = $3 WHERE id = $1`,
		messageID, content, status)
	if err != nil {
		return fmt.Errorf("fill assistant message %s: %w", messageID, err)
	}
	return nil
}
