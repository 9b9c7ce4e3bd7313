package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// DeleteConversation removes the user's conversation, its messages and its
// tasks (with their transitions and results) in one transaction. Its
// attachments are detached and expire at once, so the upload sweep removes
// them with their bytes (the store cannot reach the bytes, and a row whose
// bytes are not yet deleted must stay findable by the sweep). A running task
// is removed too: its runner is fenced out at its next write. Another user's
// conversation answers exactly like a missing one.
func (s *Store) DeleteConversation(ctx context.Context, userID, conversationID string) (err error) {
	defer classify(&err)
	convID, err := parseID("conversation id", conversationID)
	if err != nil {
		return err
	}
	if err := checkUser(userID); err != nil {
		return err
	}
	now := s.now()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var owner string
		err := tx.QueryRow(ctx, `SELECT user_id FROM conversations WHERE id = $1 FOR UPDATE`, convID).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != userID) {
			return task.Errorf(task.CodeNotFound, "conversation not found")
		}
		if err != nil {
			return fmt.Errorf("lock conversation: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE uploads SET message_id = NULL, position = NULL, expires_at = $2, updated_at = $2
			WHERE message_id IN (SELECT id FROM messages WHERE conversation_id = $1)`, convID, now); err != nil {
			return fmt.Errorf("discard attachments: %w", err)
		}
		// Tasks first: they point at their placeholder messages.
		for _, table := range []string{"tasks", "messages"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE conversation_id = $1`, convID); err != nil {
				return fmt.Errorf("delete %s: %w", table, err)
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM conversations WHERE id = $1`, convID); err != nil {
			return fmt.Errorf("delete conversation: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete conversation %s: %w", convID, err)
	}
	return nil
}
