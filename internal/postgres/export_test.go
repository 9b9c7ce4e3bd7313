package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Transition runs the one transition gate in its own transaction, so the
// external tests can try every pair of statuses through it.
func (s *Store) Transition(ctx context.Context, taskID string, attempt int, from, to task.Status, at time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return transition(ctx, tx, move{TaskID: taskID, Attempt: attempt, From: from, To: to,
			Reason: "test", At: at})
	})
}

// ErrForbiddenTransition is the gate's refusal.
var ErrForbiddenTransition = errForbiddenTransition
