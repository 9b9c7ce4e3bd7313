package postgres

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// attachmentFiles reads the attachments of a task's own user message and of
// the newest messages before it (the window Context reads), oldest first.
// The text of text files is loaded newest first while the running total
// stays within the budget, so a long conversation with many files costs the
// runner a bounded read.
const attachmentFiles = `
	WITH t AS (
		SELECT t.conversation_id, ph.created_at AS ph_at, ph.id AS ph_id,
			(SELECT um.id FROM messages um
			 WHERE um.task_id = t.id AND um.role = 'user' AND um.created_at = ph.created_at
			 ORDER BY um.id DESC LIMIT 1) AS own_id
		FROM tasks t JOIN messages ph ON ph.id = t.assistant_message_id
		WHERE t.id = $1),
	w AS (
		SELECT m.id, m.created_at FROM t CROSS JOIN LATERAL (
			SELECT m.id, m.created_at FROM messages m
			WHERE m.conversation_id = t.conversation_id
			  AND (m.created_at, m.id) < (t.ph_at, t.ph_id)
			ORDER BY m.created_at DESC, m.id DESC
			LIMIT $2) m)
	SELECT u.id, u.name, u.size, u.type, a.message_id, coalesce(a.message_id = t.own_id, false), u.sha256,
		u.text IS NOT NULL,
		CASE WHEN sum(octet_length(u.text)) OVER (
			ORDER BY w.created_at DESC, w.id DESC, a.position) <= $3 THEN u.text END
	FROM w JOIN message_attachments a ON a.message_id = w.id
	JOIN uploads u ON u.id = a.upload_id CROSS JOIN t
	ORDER BY w.created_at, w.id, a.position`

// Attachments returns what an engine reads of the attachments around a
// task (task.RunnerStore): its own message's and those of the limit
// messages before it, oldest first, with the text of text files while
// textBudget bytes allow, newest first.
func (s *Store) Attachments(ctx context.Context, taskID string, limit, textBudget int) (_ []task.AttachmentFile, err error) {
	defer classify(&err)
	id, err := parseID("task id", taskID)
	if err != nil {
		return nil, err
	}
	if limit < 0 || textBudget < 0 {
		return nil, task.Errorf(task.CodeInvalid, "limit and text budget must not be negative")
	}
	// The window holds the task's own user message too.
	rows, err := s.pool.Query(ctx, attachmentFiles, id, limit+1, textBudget)
	if err != nil {
		return nil, fmt.Errorf("attachments of task %s: %w", id, err)
	}
	files, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (task.AttachmentFile, error) {
		var (
			f    task.AttachmentFile
			sum  []byte
			text *string
		)
		err := row.Scan(&f.ID, &f.Name, &f.Size, &f.Type, &f.MessageID, &f.Own, &sum, &f.IsText, &text)
		f.SHA256 = hex.EncodeToString(sum)
		if text != nil {
			f.Text, f.TextLoaded = *text, true
		}
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("attachments of task %s: %w", id, err)
	}
	return files, nil
}
