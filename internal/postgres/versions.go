package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// SubmitVersion is Submit for a submit that places its turn itself
// (ParentTaskID or VersionOf): a regenerated answer, an edited message sent
// again, or a message that follows a turn other than the newest. The named
// turn must be in the same conversation of the same user; else nothing is
// created and the answer is invalid. A repeat of the task id is answered as
// Submit answers it, and keeps the place its first submit gave it.
func (s *Store) SubmitVersion(ctx context.Context, req task.SubmitRequest) (_ task.SubmitResult, err error) {
	defer classify(&err)
	if req.ParentTaskID != "" && req.VersionOf != "" {
		return task.SubmitResult{}, task.Errorf(task.CodeInvalid, "parent_task_id and version_of: at most one")
	}
	if req.ParentTaskID == "" && req.VersionOf == "" {
		return s.Submit(ctx, req)
	}
	taskID, err := parseID("task id", req.TaskID)
	if err != nil {
		return task.SubmitResult{}, err
	}
	convID, err := parseID("conversation id", req.ConversationID)
	if err != nil {
		return task.SubmitResult{}, err
	}
	named := req.ParentTaskID
	if named == "" {
		named = req.VersionOf
	}
	namedID, err := parseID("turn", named)
	if err != nil {
		return task.SubmitResult{}, err
	}
	if err := checkUser(req.UserID); err != nil {
		return task.SubmitResult{}, err
	}
	if req.Attachments, err = checkAttachmentIDs(req.Attachments); err != nil {
		return task.SubmitResult{}, err
	}
	if err := checkContent(req.Content, len(req.Attachments)); err != nil {
		return task.SubmitResult{}, err
	}
	if req.Preamble, err = checkPreamble(req.Preamble); err != nil {
		return task.SubmitResult{}, err
	}
	req.TaskID, req.ConversationID = taskID, convID

	var res task.SubmitResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The named turn: its user message in this user's conversation.
		var parent *string
		err := tx.QueryRow(ctx, `
			SELECT m.parent_task_id FROM messages m JOIN conversations c ON c.id = m.conversation_id
			WHERE m.conversation_id = $1 AND m.task_id = $2 AND m.role = 'user' AND c.user_id = $3
			ORDER BY m.created_at DESC, m.id DESC LIMIT 1`, convID, namedID, req.UserID).Scan(&parent)
		if errors.Is(err, pgx.ErrNoRows) {
			return task.Errorf(task.CodeInvalid, "no such message in this conversation")
		}
		if err != nil {
			return fmt.Errorf("read the turn %s: %w", namedID, err)
		}
		if req.ParentTaskID != "" {
			parent = &namedID
		}
		res, err = submit(ctx, tx, req, s.now(), s.cfg.MaxRetries)
		if err != nil || !res.Created {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE messages SET parent_task_id = $3 WHERE conversation_id = $1 AND task_id = $2`,
			convID, taskID, parent); err != nil {
			return fmt.Errorf("place the turn: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE conversations SET branched = true WHERE id = $1 AND NOT branched`, convID); err != nil {
			return fmt.Errorf("mark the conversation branched: %w", err)
		}
		return nil
	})
	if err != nil {
		return task.SubmitResult{}, fmt.Errorf("submit task %s: %w", taskID, err)
	}
	return res, nil
}

// turnPath is the task ids of the turns before a task's own on its path
// (its parent, that turn's parent, and so on), when its conversation has
// versions; ok is false for a conversation without any, where the turns
// before it are simply the earlier ones.
const turnPath = `
	WITH RECURSIVE me AS (
		SELECT m.conversation_id, m.parent_task_id, c.branched
		FROM tasks t JOIN messages m ON m.id = t.assistant_message_id
		JOIN conversations c ON c.id = m.conversation_id
		WHERE t.id = $1),
	path (task_id, depth) AS (
		SELECT parent_task_id, 1 FROM me WHERE branched AND parent_task_id IS NOT NULL
		UNION ALL
		SELECT m.parent_task_id, p.depth + 1
		FROM path p, me, LATERAL (
			SELECT parent_task_id FROM messages
			WHERE conversation_id = me.conversation_id AND task_id = p.task_id AND role = 'user'
			ORDER BY created_at DESC, id DESC LIMIT 1) m
		WHERE m.parent_task_id IS NOT NULL AND p.depth < $2)
	SELECT coalesce((SELECT branched FROM me), false), coalesce(array_agg(task_id::text), '{}') FROM path`

// onPath keeps the messages of the turns on a task's path (Context's
// messages are the conversation's order of writing, where other versions of
// earlier turns appear too). A conversation without versions keeps all.
func (s *Store) onPath(ctx context.Context, taskID string, msgs []task.Message, limit int) ([]task.Message, error) {
	if len(msgs) == 0 {
		return msgs, nil
	}
	var (
		branched bool
		path     []string
	)
	if err := s.pool.QueryRow(ctx, turnPath, taskID, limit).Scan(&branched, &path); err != nil {
		return nil, fmt.Errorf("the path of task %s: %w", taskID, err)
	}
	if !branched {
		return msgs, nil
	}
	on := make(map[string]bool, len(path))
	for _, id := range path {
		on[id] = true
	}
	kept := msgs[:0]
	for _, m := range msgs {
		if m.TaskID != nil && on[*m.TaskID] {
			kept = append(kept, m)
		}
	}
	return kept, nil
}
