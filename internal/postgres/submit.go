package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tether-dev/tether/internal/task"
)

// errInUse is every refusal of a submit whose ids are taken: by another
// submission, another conversation or another user. It says nothing more, so
// ids cannot be probed.
func errInUse() error {
	return task.Errorf(task.CodeConflict, "task id or conversation id is already in use")
}

// Submit creates a task, or finds the one this submit repeats, or starts a new
// attempt of it if it failed (PROTOCOL.md section 4, submit). A submit
// repeats an existing task when its user, conversation, content,
// attachments and preamble are all the same (resubmit). The unique key
// on the task id decides between concurrent submits of one id: the insert
// does nothing when the row exists, and the existing row is then read under
// a lock.
func (s *Store) Submit(ctx context.Context, req task.SubmitRequest) (_ task.SubmitResult, err error) {
	defer classify(&err)
	taskID, err := parseID("task id", req.TaskID)
	if err != nil {
		return task.SubmitResult{}, err
	}
	convID, err := parseID("conversation id", req.ConversationID)
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

	if len(req.Attachments) == 0 {
		created, ok, err := s.submitNew(ctx, req)
		if err != nil {
			return task.SubmitResult{}, fmt.Errorf("submit task %s: %w", taskID, err)
		}
		if ok {
			return task.SubmitResult{Task: created, Created: true}, nil
		}
	}
	var res task.SubmitResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = submit(ctx, tx, req, s.now(), s.cfg.MaxRetries)
		return err
	})
	if err != nil {
		return task.SubmitResult{}, fmt.Errorf("submit task %s: %w", taskID, err)
	}
	return res, nil
}

// submitNew is the common submit, a new task without attachments, as one
// statement: one round trip and one commit instead of a transaction of
// seven. It writes everything the full transaction would (the task, its
// transition, the user message and the assistant placeholder, and the
// conversation, created or touched) or nothing at all: the task is inserted
// first, unless its id is taken or the conversation is known to be another
// user's, and everything else is made from its RETURNING. The composite key
// tasks (conversation_id, user_id) -> conversations refuses a task in
// another user's conversation that appears concurrently, failing the whole
// statement. Whenever nothing was written, the full transaction decides. It
// returns how many tasks it created (0 or 1): the created row is known
// without reading it back (newTask). It never decides whether a submit
// repeats an existing task: it only inserts a new id.
const submitNew = `
	WITH t AS (
		INSERT INTO tasks (id, user_id, conversation_id, assistant_message_id, status, attempt,
			submit_attempt, seq, progress, input, output, created_at, updated_at, attachments, preamble)
		SELECT $1::uuid, $2::text, $3::uuid, $4::uuid, 'pending', 1, 1, 0, 0, $6::text, '',
			$7::timestamptz, $7::timestamptz, '{}', $9::jsonb
		WHERE NOT EXISTS (SELECT 1 FROM conversations WHERE id = $3::uuid AND user_id <> $2::text)
		ON CONFLICT (id) DO NOTHING
		RETURNING id, conversation_id, user_id),
	c AS (
		INSERT INTO conversations (id, user_id, title, created_at, updated_at)
		SELECT conversation_id, user_id, $8::text, $7::timestamptz, $7::timestamptz FROM t
		ON CONFLICT (id) DO UPDATE SET updated_at = greatest(conversations.updated_at, excluded.updated_at)
		WHERE conversations.user_id = excluded.user_id),
	tr AS (
		INSERT INTO task_transitions (task_id, attempt, from_status, to_status, reason, at)
		SELECT id, 1, NULL, 'pending', '` + task.ReasonSubmitted + `', $7::timestamptz FROM t),
	m AS (
		INSERT INTO messages (id, conversation_id, role, content, task_id, status, created_at)
		SELECT v.id, t.conversation_id, v.role, v.content, t.id, v.status, $7::timestamptz
		FROM t, (VALUES ($5::uuid, 'user', $6::text, NULL::text),
		                ($4::uuid, 'assistant', '', '` + task.MessageGenerating + `')) AS v (id, role, content, status))
	SELECT count(*) FROM t`

// submitNew runs the one-statement submit; ok is false when it wrote
// nothing (the full transaction then decides).
func (s *Store) submitNew(ctx context.Context, req task.SubmitRequest) (task.Task, bool, error) {
	// Made in this order, the user message's UUIDv7 sorts before the
	// placeholder's; both share created_at.
	userMsg, err := uuid.NewV7()
	if err != nil {
		return task.Task{}, false, fmt.Errorf("make message id: %w", err)
	}
	assistantMsg, err := uuid.NewV7()
	if err != nil {
		return task.Task{}, false, fmt.Errorf("make message id: %w", err)
	}
	preamble, err := encodePreamble(req.Preamble)
	if err != nil {
		return task.Task{}, false, err
	}
	now := s.now()
	var n int
	err = s.pool.QueryRow(ctx, submitNew, req.TaskID, req.UserID, req.ConversationID,
		assistantMsg.String(), userMsg.String(), req.Content, now, title(req.Content), preamble).Scan(&n)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == foreignKeyViolation:
		// Another user's conversation appeared meanwhile.
		return task.Task{}, false, nil
	case err != nil:
		return task.Task{}, false, fmt.Errorf("insert task: %w", err)
	case n == 0:
		return task.Task{}, false, nil
	}
	return newTask(req, now), true, nil
}

// newTask is the row submitNew inserts, as scanTask would read it back.
func newTask(req task.SubmitRequest, now time.Time) task.Task {
	return task.Task{ID: req.TaskID, ConversationID: req.ConversationID, UserID: req.UserID,
		Status: task.StatusPending, Attempt: 1, Input: req.Content, CreatedAt: now, UpdatedAt: now,
		Preamble: req.Preamble}
}

// submit is Submit's transaction.
func submit(ctx context.Context, tx pgx.Tx, req task.SubmitRequest, now time.Time, maxRetries int) (task.SubmitResult, error) {
	newConv, err := ensureConversation(ctx, tx, req, now)
	if err != nil {
		return task.SubmitResult{}, err
	}
	// A finished task may be purged between the insert that found it and the
	// read that locks it; then the insert is tried again.
	for range 3 {
		created, err := insertTask(ctx, tx, req, !newConv, now)
		if err == nil {
			return task.SubmitResult{Task: created, Created: true}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return task.SubmitResult{}, err
		}
		existing, err := scanTask(tx.QueryRow(ctx,
			`SELECT `+taskColumns+` FROM tasks WHERE id = $1 FOR UPDATE`, req.TaskID))
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return task.SubmitResult{}, fmt.Errorf("read existing task: %w", err)
		}
		return resubmit(ctx, tx, existing, req, now, maxRetries)
	}
	return task.SubmitResult{}, task.Errorf(task.CodeUnavailable, "task id is being purged; try again")
}

// ensureConversation creates the conversation of a submit (created true) or
// checks that the existing one is the user's.
func ensureConversation(ctx context.Context, tx pgx.Tx, req task.SubmitRequest, now time.Time) (created bool, err error) {
	// A message of files alone names the conversation after its first file.
	var firstFile string
	if len(req.Attachments) > 0 {
		err := tx.QueryRow(ctx, `SELECT name FROM uploads WHERE id = $1 AND user_id = $2`,
			req.Attachments[0], req.UserID).Scan(&firstFile)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return false, fmt.Errorf("read the first attachment's name: %w", err)
		}
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO conversations (id, user_id, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (id) DO NOTHING`,
		req.ConversationID, req.UserID, task.TitleWithFile(req.Content, firstFile), now)
	if err != nil {
		return false, fmt.Errorf("create conversation %s: %w", req.ConversationID, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var owner string
	err = tx.QueryRow(ctx, `SELECT user_id FROM conversations WHERE id = $1`,
		req.ConversationID).Scan(&owner)
	if err != nil {
		return false, fmt.Errorf("read conversation %s: %w", req.ConversationID, err)
	}
	if owner != req.UserID {
		return false, errInUse()
	}
	return false, nil
}

// insertTask writes a new task with its two messages, or returns
// pgx.ErrNoRows when the id exists. touch: the conversation existed before
// and its updated_at must move.
func insertTask(ctx context.Context, tx pgx.Tx, req task.SubmitRequest, touch bool, now time.Time) (task.Task, error) {
	// Made in this order, the user message's UUIDv7 sorts before the
	// placeholder's; both share created_at.
	userMsg, err := uuid.NewV7()
	if err != nil {
		return task.Task{}, fmt.Errorf("make message id: %w", err)
	}
	assistantMsg, err := uuid.NewV7()
	if err != nil {
		return task.Task{}, fmt.Errorf("make message id: %w", err)
	}
	preamble, err := encodePreamble(req.Preamble)
	if err != nil {
		return task.Task{}, err
	}
	r, err := scanTask(tx.QueryRow(ctx, `
		INSERT INTO tasks (id, user_id, conversation_id, assistant_message_id, status, attempt,
			submit_attempt, seq, progress, input, output, created_at, updated_at, attachments, preamble)
		VALUES ($1, $2, $3, $4, 'pending', 1, 1, 0, 0, $5, '', $6, $6, $7, $8)
		ON CONFLICT (id) DO NOTHING
		RETURNING `+storedColumns,
		req.TaskID, req.UserID, req.ConversationID, assistantMsg, req.Content, now, req.Attachments, preamble))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Task{}, err
	}
	if err != nil {
		return task.Task{}, fmt.Errorf("insert task: %w", err)
	}
	err = transition(ctx, tx, move{TaskID: r.ID, Attempt: 1, To: task.StatusPending,
		Reason: task.ReasonSubmitted, At: now})
	if err != nil {
		return task.Task{}, err
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO messages (id, conversation_id, role, content, task_id, status, created_at)
		VALUES ($1, $3, 'user', $4, $5, NULL, $6),
		       ($2, $3, 'assistant', '', $5, 'generating', $6)`,
		userMsg, assistantMsg, req.ConversationID, req.Content, req.TaskID, now)
	if err != nil {
		return task.Task{}, fmt.Errorf("insert messages: %w", err)
	}
	if err := attachUploads(ctx, tx, req.UserID, req.ConversationID, req.Attachments, userMsg.String(), now); err != nil {
		return task.Task{}, err
	}
	if touch {
		if err := touchConversation(ctx, tx, req.ConversationID, now); err != nil {
			return task.Task{}, err
		}
	}
	return r.Task, nil
}

// resubmit answers a submit of an existing (locked) task: the same one is a
// lookup, a failed one starts a new attempt, anything else is a conflict.
// The same submit has the same user, conversation, content, attachments and
// preamble (req's as checkPreamble returned it, so both are as a read
// returns them).
func resubmit(ctx context.Context, tx pgx.Tx, r taskRow, req task.SubmitRequest, now time.Time, maxRetries int) (task.SubmitResult, error) {
	if r.UserID != req.UserID || r.ConversationID != req.ConversationID || r.Input != req.Content ||
		!task.SameAttachments(r.attachments, req.Attachments) || !samePreamble(r.Preamble, req.Preamble) {
		return task.SubmitResult{}, errInUse()
	}
	if r.Status != task.StatusFailed {
		return task.SubmitResult{Task: r.Task}, nil
	}
	if err := checkRetries(ctx, tx, r.ID, maxRetries); err != nil {
		return task.SubmitResult{}, err
	}
	err := transition(ctx, tx, move{TaskID: r.ID, Attempt: r.Attempt + 1,
		From: task.StatusFailed, To: task.StatusPending, Reason: task.ReasonRetried, At: now})
	if err != nil {
		return task.SubmitResult{}, err
	}
	retried, err := scanTask(tx.QueryRow(ctx, `
		UPDATE tasks SET status = 'pending', attempt = attempt + 1, submit_attempt = attempt + 1,
			seq = seq + 1, output = '', keep = 0, progress = 0, error = NULL, result_ref = NULL,
			runner_id = NULL, lease_until = NULL, cancel_requested = false,
			finished_at = NULL, log_purged = false, redispatched_at = NULL, updated_at = $2
		WHERE id = $1 AND status = 'failed'
		RETURNING `+storedColumns, r.ID, now))
	if err != nil {
		return task.SubmitResult{}, fmt.Errorf("retry task: %w", err)
	}
	if err := fillPlaceholder(ctx, tx, r.assistantMessageID, "", task.MessageGenerating); err != nil {
		return task.SubmitResult{}, err
	}
	if err := touchConversation(ctx, tx, r.ConversationID, now); err != nil {
		return task.SubmitResult{}, err
	}
	return task.SubmitResult{Task: retried.Task, Retried: true}, nil
}

// touchConversation records activity in a conversation; it never moves
// updated_at back (a clock behind another process's).
func touchConversation(ctx context.Context, tx pgx.Tx, id string, now time.Time) error {
	_, err := tx.Exec(ctx,
		`UPDATE conversations SET updated_at = greatest(updated_at, $2) WHERE id = $1`, id, now)
	if err != nil {
		return fmt.Errorf("touch conversation %s: %w", id, err)
	}
	return nil
}

// foreignKeyViolation is SQLSTATE 23503.
const foreignKeyViolation = "23503"
