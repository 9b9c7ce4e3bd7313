package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Pages are keyset pages on (time, id), newest first in the query, so a
// page costs an index range scan however deep it is.

const (
	historyFirst = `
		SELECT id, conversation_id, role, content, task_id, status, created_at, parent_task_id
		FROM messages WHERE conversation_id = $1
		ORDER BY created_at DESC, id DESC LIMIT $2`
	historyBefore = `
		SELECT id, conversation_id, role, content, task_id, status, created_at, parent_task_id
		FROM messages WHERE conversation_id = $1 AND (created_at, id) < ($3, $4)
		ORDER BY created_at DESC, id DESC LIMIT $2`

	// A conversation's active task: pending or running, the newest if ever
	// more than one.
	conversationColumns = `c.id, c.title, c.updated_at,
		(SELECT t.id FROM tasks t
		 WHERE t.conversation_id = c.id AND t.status IN ('pending', 'running')
		 ORDER BY t.created_at DESC, t.id DESC LIMIT 1)`
	conversationsFirst = `SELECT ` + conversationColumns + `
		FROM conversations c WHERE c.user_id = $1
		ORDER BY c.updated_at DESC, c.id DESC LIMIT $2`
	conversationsBefore = `SELECT ` + conversationColumns + `
		FROM conversations c WHERE c.user_id = $1 AND (c.updated_at, c.id) < ($3, $4)
		ORDER BY c.updated_at DESC, c.id DESC LIMIT $2`
)

// History returns the newest messages of the user's conversation before
// the cursor, oldest first, and the cursor of the page before them.
func (s *Store) History(ctx context.Context, userID, conversationID string, p task.Page) (_ []task.Message, _ string, err error) {
	defer classify(&err)
	convID, err := parseID("conversation id", conversationID)
	if err != nil {
		return nil, "", err
	}
	if err := checkUser(userID); err != nil {
		return nil, "", err
	}
	n, err := limit(p.Limit)
	if err != nil {
		return nil, "", err
	}
	before, hasBefore, err := s.decodeCursor(cursorMessages, convID, p.Before)
	if err != nil {
		return nil, "", err
	}

	var owned bool
	err = s.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM conversations WHERE id = $1 AND user_id = $2)`,
		convID, userID).Scan(&owned)
	if err != nil {
		return nil, "", fmt.Errorf("history of conversation %s: %w", convID, err)
	}
	if !owned {
		return nil, "", task.Errorf(task.CodeNotFound, "conversation not found")
	}

	var rows pgx.Rows
	if hasBefore {
		rows, err = s.pool.Query(ctx, historyBefore, convID, n+1, before.At, before.ID)
	} else {
		rows, err = s.pool.Query(ctx, historyFirst, convID, n+1)
	}
	if err != nil {
		return nil, "", fmt.Errorf("history of conversation %s: %w", convID, err)
	}
	msgs, err := pgx.CollectRows(rows, scanHistoryMessage)
	if err != nil {
		return nil, "", fmt.Errorf("history of conversation %s: %w", convID, err)
	}
	next := ""
	if len(msgs) > n {
		msgs = msgs[:n]
		oldest := msgs[n-1]
		next = s.encodeCursor(cursorMessages, convID, position{At: oldest.CreatedAt, ID: oldest.ID})
	}
	slices.Reverse(msgs)
	if err := fillAttachments(ctx, s.pool, msgs); err != nil {
		return nil, "", fmt.Errorf("history of conversation %s: %w", convID, err)
	}
	return msgs, next, nil
}

func scanMessage(row pgx.CollectableRow) (task.Message, error) {
	var m task.Message
	err := row.Scan(&m.ID, &m.ConversationID, &m.Role, &m.Content, &m.TaskID, &m.Status, &m.CreatedAt)
	m.CreatedAt = m.CreatedAt.UTC()
	return m, err
}

// scanHistoryMessage reads a history row: a message and the turn it follows.
func scanHistoryMessage(row pgx.CollectableRow) (task.Message, error) {
	var m task.Message
	err := row.Scan(&m.ID, &m.ConversationID, &m.Role, &m.Content, &m.TaskID, &m.Status, &m.CreatedAt, &m.ParentTaskID)
	m.CreatedAt = m.CreatedAt.UTC()
	return m, err
}

// Conversations returns the user's conversations, newest activity first,
// and the cursor of the next (older) page.
func (s *Store) Conversations(ctx context.Context, userID string, p task.Page) (_ []task.Conversation, _ string, err error) {
	defer classify(&err)
	if err := checkUser(userID); err != nil {
		return nil, "", err
	}
	n, err := limit(p.Limit)
	if err != nil {
		return nil, "", err
	}
	before, hasBefore, err := s.decodeCursor(cursorConversations, userID, p.Before)
	if err != nil {
		return nil, "", err
	}
	var rows pgx.Rows
	if hasBefore {
		rows, err = s.pool.Query(ctx, conversationsBefore, userID, n+1, before.At, before.ID)
	} else {
		rows, err = s.pool.Query(ctx, conversationsFirst, userID, n+1)
	}
	if err != nil {
		return nil, "", fmt.Errorf("list conversations: %w", err)
	}
	convs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (task.Conversation, error) {
		var c task.Conversation
		err := row.Scan(&c.ID, &c.Title, &c.UpdatedAt, &c.ActiveTaskID)
		c.UpdatedAt = c.UpdatedAt.UTC()
		return c, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list conversations: %w", err)
	}
	next := ""
	if len(convs) > n {
		convs = convs[:n]
		last := convs[n-1]
		next = s.encodeCursor(cursorConversations, userID, position{At: last.UpdatedAt, ID: last.ID})
	}
	return convs, next, nil
}
