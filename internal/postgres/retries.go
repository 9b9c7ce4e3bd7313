package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// checkRetries bounds the user's retries of one failed task (PROTOCOL.md
// section 9: attempts are TETHER_MAX_ATTEMPTS per submission plus at most
// this many retries). Each retry is a failed -> pending transition, which
// nothing else makes, so the log of transitions counts them; the task row
// is locked by the caller.
func checkRetries(ctx context.Context, tx pgx.Tx, taskID string, max int) error {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM task_transitions
		WHERE task_id = $1 AND from_status = 'failed' AND to_status = 'pending'`, taskID).Scan(&n)
	if err != nil {
		return fmt.Errorf("count retries of task %s: %w", taskID, err)
	}
	if n >= max {
		return &task.Error{Code: task.CodeConflict, Err: task.ErrTooManyRetries,
			Message: fmt.Sprintf("this task was retried %d times, the most allowed; submit it as a new message", n)}
	}
	return nil
}
