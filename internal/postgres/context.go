package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// contextBefore reads the messages before a task's placeholder, newest
// first: the task's own user message, then the conversation before it. The
// LATERAL subquery walks the conversation's page index backwards from the
// placeholder and stops after limit rows; a plain join sorted every earlier
// message of the conversation first (77 ms against 0.8 ms on 50,000).
const contextBefore = `
	SELECT m.id, m.conversation_id, m.role, m.content, m.task_id, m.status, m.created_at
	FROM tasks t
	JOIN messages ph ON ph.id = t.assistant_message_id
	CROSS JOIN LATERAL (
		SELECT * FROM messages m
		WHERE m.conversation_id = t.conversation_id
		  AND (m.created_at, m.id) < (ph.created_at, ph.id)
		ORDER BY m.created_at DESC, m.id DESC
		LIMIT $2) m
	WHERE t.id = $1
	ORDER BY m.created_at DESC, m.id DESC`

// Context returns the messages of a task's conversation that came before
// the task's own user message, oldest first: the newest limit of them. An
// engine that talks to a model sends them as the conversation so far.
func (s *Store) Context(ctx context.Context, taskID string, limit int) (_ []task.Message, err error) {
	defer classify(&err)
	id, err := parseID("task id", taskID)
	if err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, task.Errorf(task.CodeInvalid, "limit must be at least 1")
	}
	rows, err := s.pool.Query(ctx, contextBefore, id, limit+1)
	if err != nil {
		return nil, fmt.Errorf("context of task %s: %w", id, err)
	}
	msgs, err := pgx.CollectRows(rows, scanMessage)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("context of task %s: %w", id, err)
	}
	// The newest row is the task's own user message, written with its placeholder.
	if len(msgs) > 0 && msgs[0].Role == task.RoleUser && msgs[0].TaskID != nil && *msgs[0].TaskID == id {
		msgs = msgs[1:]
	}
	if len(msgs) > limit {
		msgs = msgs[:limit]
	}
	if msgs, err = s.onPath(ctx, id, msgs, limit); err != nil {
		return nil, err
	}
	slices.Reverse(msgs)
	return msgs, nil
}
