package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Attachments of submits (PROTOCOL.md section 10). A submit may name up to
// ten finished uploads of its user; they are attached to its user message in
// the transaction that creates the task, so a refused attachment creates
// nothing, and each upload belongs to one message at most.

// checkAttachmentIDs validates the ids of a submit and returns them in the
// canonical form, before the database is touched.
func checkAttachmentIDs(ids []string) ([]string, error) {
	if err := task.CheckAttachments(ids); err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, raw := range ids {
		id, err := parseID("attachment", raw)
		if err != nil {
			return nil, err
		}
		out[i] = id
	}
	// Canonical ids may now repeat ("ABC…" and "abc…").
	if err := task.CheckAttachments(out); err != nil {
		return nil, err
	}
	return out, nil
}

// attachUploads attaches the uploads ids (in order) to the new user message
// messageID. Each must be the user's, finished, unexpired and attached to no
// other message; anything else is invalid and rolls the submit back. A
// missing upload and another user's get the same answer.
func attachUploads(ctx context.Context, tx pgx.Tx, userID string, ids []string, messageID string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `
		SELECT id, user_id, received, size, finished_at IS NOT NULL, message_id IS NOT NULL,
			coalesce(expires_at > $2, true)
		FROM uploads WHERE id = ANY($1) FOR UPDATE`, ids, now)
	if err != nil {
		return fmt.Errorf("lock attachments: %w", err)
	}
	type state struct {
		owner                    string
		received, size           int64
		finished, attached, live bool
	}
	found := map[string]state{}
	var (
		id string
		st state
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &st.owner, &st.received, &st.size, &st.finished, &st.attached, &st.live},
		func() error {
			found[id] = st
			return nil
		})
	if err != nil {
		return fmt.Errorf("lock attachments: %w", err)
	}
	for _, id := range ids {
		st, ok := found[id]
		switch {
		case !ok || st.owner != userID || !st.live:
			return task.Errorf(task.CodeInvalid, "attachment %s: no such upload", id)
		case !st.finished:
			return task.Errorf(task.CodeInvalid, "attachment %s: the upload is not finished (%d of %d bytes)", id, st.received, st.size)
		case st.attached:
			return task.Errorf(task.CodeInvalid, "attachment %s: already attached to another message", id)
		}
	}
	_, err = tx.Exec(ctx, `
		UPDATE uploads SET message_id = $2, position = array_position($1::uuid[], id) - 1,
			expires_at = NULL, updated_at = $3
		WHERE id = ANY($1)`, ids, messageID, now)
	if err != nil {
		return fmt.Errorf("attach uploads: %w", err)
	}
	return nil
}

// fillAttachments sets the attachments of each message (an empty list for
// a message without any), in the order they were attached.
func fillAttachments(ctx context.Context, q querier, msgs []task.Message) error {
	ids := make([]string, 0, len(msgs))
	at := make(map[string]int, len(msgs))
	for i := range msgs {
		msgs[i].Attachments = []task.Attachment{}
		if msgs[i].Role == task.RoleUser {
			ids = append(ids, msgs[i].ID)
			at[msgs[i].ID] = i
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `
		SELECT message_id, id, name, size, type FROM uploads
		WHERE message_id = ANY($1) ORDER BY message_id, position`, ids)
	if err != nil {
		return fmt.Errorf("read attachments: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var msgID string
		var a task.Attachment
		if err := rows.Scan(&msgID, &a.ID, &a.Name, &a.Size, &a.Type); err != nil {
			return fmt.Errorf("read attachments: %w", err)
		}
		i := at[msgID]
		msgs[i].Attachments = append(msgs[i].Attachments, a)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read attachments: %w", err)
	}
	return nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
