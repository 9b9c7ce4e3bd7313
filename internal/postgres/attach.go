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
// nothing. An upload may be held by several messages of one conversation (a
// version sends its turn's files again), never by messages of two.

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
// messageID of conversation convID. Each must be the user's and finished;
// one that no message holds must not have expired, and one that a message
// holds must be held in this conversation (a regenerated or edited message
// sends its files again). Anything else is invalid and rolls the submit
// back. A missing upload and another user's get the same answer.
func attachUploads(ctx context.Context, tx pgx.Tx, userID, convID string, ids []string, messageID string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `
		SELECT u.id, u.user_id, u.received, u.size, u.finished_at IS NOT NULL,
			u.message_id IS NOT NULL, coalesce(m.conversation_id = $3, false),
			coalesce(u.expires_at > $2, true)
		FROM uploads u LEFT JOIN messages m ON m.id = u.message_id
		WHERE u.id = ANY($1) FOR UPDATE OF u`, ids, now, convID)
	if err != nil {
		return fmt.Errorf("lock attachments: %w", err)
	}
	type state struct {
		owner                          string
		received, size                 int64
		finished, attached, here, live bool
	}
	found := map[string]state{}
	var (
		id string
		st state
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &st.owner, &st.received, &st.size, &st.finished, &st.attached, &st.here, &st.live},
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
		case st.attached && !st.here:
			return task.Errorf(task.CodeInvalid, "attachment %s: already attached to a message of another conversation", id)
		}
	}
	// The first message to hold an upload keeps it for the conversation's life.
	_, err = tx.Exec(ctx, `
		UPDATE uploads SET message_id = $2, position = array_position($1::uuid[], id) - 1,
			expires_at = NULL, updated_at = $3
		WHERE id = ANY($1) AND message_id IS NULL`, ids, messageID, now)
	if err != nil {
		return fmt.Errorf("attach uploads: %w", err)
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO message_attachments (message_id, position, upload_id)
		SELECT $2, a.ord - 1, a.id FROM unnest($1::uuid[]) WITH ORDINALITY AS a (id, ord)`, ids, messageID)
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
		SELECT a.message_id, u.id, u.name, u.size, u.type
		FROM message_attachments a JOIN uploads u ON u.id = a.upload_id
		WHERE a.message_id = ANY($1) ORDER BY a.message_id, a.position`, ids)
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
