package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tether-dev/tether/internal/task"
)

// Group commit of new tasks. Concurrent submits of new tasks without
// attachments share one statement, so one round trip and one commit: a
// submit that finds fewer than batcher.slots batches in flight runs at once
// (a lone submit never waits); one that finds them all busy queues, and
// when a batch ends, the submits queued meanwhile (up to maxBatchSize)
// become the next batch, led by the first of them. There is no timer and no
// goroutine of its own: the batching window is exactly the time the batches
// in flight take, and the callers themselves run the batches.
//
// A batch only ever inserts new ids (submitBatch); each caller is answered
// from its own row. A submit whose row was not written (its id exists, its
// conversation is another user's, the batch met another user's
// conversation that appeared meanwhile, any other refusal of the
// statement) is decided by the full transaction, exactly as a lone submit
// would be. Nothing is answered before the batch's commit returns: if the
// database cannot be reached, every caller of the batch gets unavailable,
// never a success.
const maxBatchSize = 64

// batchSlots is how many batches a pool of maxConns connections runs at
// once: half of them, so other requests keep connections, and at least
// two, so one batch's commit overlaps the next one's statement.
func batchSlots(maxConns int32) int { return max(2, int(maxConns)/2) }

// batcher queues submits for group commit.
type batcher struct {
	// slots is how many batches may be in flight.
	slots    int
	mu       sync.Mutex
	inflight int
	queue    []*pendingSubmit
	closed   bool
}

// pendingSubmit is one caller's submit in a batcher.
type pendingSubmit struct {
	req task.SubmitRequest
	// preamble is req's, encoded (NULL when nil).
	preamble *string
	// lead receives the batch this submit is to run.
	lead chan []*pendingSubmit
	// done is closed once written says whether its row was inserted, or
	// err why the batch failed.
	done    chan struct{}
	written bool
	at      time.Time
	err     error
}

// errClosed answers submits queued or made after Close.
var errClosed = task.Errorf(task.CodeUnavailable, "the store is closing")

// submitBatched submits a new task without attachments in a batch. ok is
// false when its row was not written; the full transaction then decides.
func (s *Store) submitBatched(ctx context.Context, req task.SubmitRequest) (task.Task, bool, error) {
	p := &pendingSubmit{req: req, lead: make(chan []*pendingSubmit, 1), done: make(chan struct{})}
	// Encoded here, so a preamble that cannot be fails its own submit only.
	pre, err := encodePreamble(req.Preamble)
	if err != nil {
		return task.Task{}, false, err
	}
	if pre != nil {
		p.preamble = new(string)
		*p.preamble = string(pre)
	}
	b := &s.batch
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return task.Task{}, false, errClosed
	case b.inflight < b.slots && len(b.queue) == 0:
		b.inflight++
		b.mu.Unlock()
		s.runBatch(ctx, []*pendingSubmit{p})
	default:
		b.queue = append(b.queue, p)
		b.mu.Unlock()
		if err := s.awaitBatch(ctx, p); err != nil {
			return task.Task{}, false, err
		}
	}
	if p.err != nil || !p.written {
		return task.Task{}, false, p.err
	}
	return newTask(req, p.at), true, nil
}

// awaitBatch waits until p's batch is done, running it if p leads it. A
// caller that gives up leaves: still queued, it leaves the queue; taken
// into a batch, it leaves the batch to answer for itself, unless it leads
// it (the statement is bounded by statement_timeout).
func (s *Store) awaitBatch(ctx context.Context, p *pendingSubmit) error {
	select {
	case batch := <-p.lead:
		s.runBatch(ctx, batch)
		return nil
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	b := &s.batch
	b.mu.Lock()
	for i, q := range b.queue {
		if q == p {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.mu.Unlock()
			return ctx.Err()
		}
	}
	b.mu.Unlock()
	// Taken: handOver sent the batch with the same lock held, so a leader
	// finds it here and must run it (the others wait on it); a member may
	// go, its submit written or not (as when a client hangs up during a
	// commit).
	select {
	case batch := <-p.lead:
		s.runBatch(ctx, batch)
		return nil
	case <-p.done:
		return nil
	default:
		return ctx.Err()
	}
}

// runBatch writes batch, answers its callers, and hands the submits queued
// meanwhile to the next leader (or frees its slot).
func (s *Store) runBatch(ctx context.Context, batch []*pendingSubmit) {
	s.writeBatch(ctx, batch)
	for _, p := range batch {
		close(p.done)
	}
	s.batch.handOver()
}

// handOver ends a batch's turn: the submits queued meanwhile become the
// next batch, run by the first of them, or the slot is free.
func (b *batcher) handOver() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.inflight--
		return
	}
	next, rest := takeBatch(b.queue)
	b.queue = rest
	next[0].lead <- next
}

// takeBatch takes up to maxBatchSize submits from the front of queue with
// distinct task ids and distinct conversations (one statement may insert
// or touch a row once); the others stay queued, in order, for the next.
func takeBatch(queue []*pendingSubmit) (batch, rest []*pendingSubmit) {
	tasks := map[string]bool{}
	convs := map[string]bool{}
	for _, p := range queue {
		if len(batch) == maxBatchSize || tasks[p.req.TaskID] || convs[p.req.ConversationID] {
			rest = append(rest, p)
			continue
		}
		tasks[p.req.TaskID], convs[p.req.ConversationID] = true, true
		batch = append(batch, p)
	}
	return batch, rest
}

// submitBatch inserts new tasks, one per element of its arrays (distinct
// task ids and conversations), as one statement: for each whose id is free
// and whose conversation is not known to be another user's, the task, its
// transition, the user message and the assistant placeholder, and the
// conversation, created or touched. Everything is made from the inserted
// tasks' RETURNING; the composite key tasks (conversation_id, user_id) ->
// conversations refuses a task in another user's conversation that appears
// concurrently, failing the whole statement. It returns the placeholders
// of the tasks it inserted, which tell its callers apart (a task id might
// not: a concurrent batch elsewhere may hold the same id).
const submitBatch = `
	WITH r AS (
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::uuid[],
			$6::text[], $7::text[], $8::text[])
			AS r (id, user_id, conversation_id, assistant_id, user_msg_id, content, title, preamble)),
	t AS (
		INSERT INTO tasks (id, user_id, conversation_id, assistant_message_id, status, attempt,
			submit_attempt, seq, progress, input, output, created_at, updated_at, attachments, preamble)
		SELECT r.id, r.user_id, r.conversation_id, r.assistant_id, 'pending', 1, 1, 0, 0, r.content, '',
			$9::timestamptz, $9::timestamptz, '{}', r.preamble::jsonb
		FROM r
		WHERE NOT EXISTS (SELECT 1 FROM conversations c
			WHERE c.id = r.conversation_id AND c.user_id <> r.user_id)
		ON CONFLICT (id) DO NOTHING
		RETURNING id, conversation_id, user_id, assistant_message_id),
	c AS (
		INSERT INTO conversations (id, user_id, title, created_at, updated_at)
		SELECT t.conversation_id, t.user_id, r.title, $9::timestamptz, $9::timestamptz
		FROM t JOIN r ON r.assistant_id = t.assistant_message_id
		ON CONFLICT (id) DO UPDATE SET updated_at = greatest(conversations.updated_at, excluded.updated_at)
		WHERE conversations.user_id = excluded.user_id),
	tr AS (
		INSERT INTO task_transitions (task_id, attempt, from_status, to_status, reason, at)
		SELECT id, 1, NULL, 'pending', '` + task.ReasonSubmitted + `', $9::timestamptz FROM t),
	m AS (
		INSERT INTO messages (id, conversation_id, role, content, task_id, status, created_at)
		SELECT v.id, t.conversation_id, v.role, v.content, t.id, v.status, $9::timestamptz
		FROM t JOIN r ON r.assistant_id = t.assistant_message_id,
			LATERAL (VALUES (r.user_msg_id, 'user', r.content, NULL::text),
			                (r.assistant_id, 'assistant', '', '` + task.MessageGenerating + `'))
			AS v (id, role, content, status))
	SELECT assistant_message_id FROM t`

// writeBatch runs submitBatch for batch and records each submit's outcome.
// The statement runs apart from the leader's cancellation (the others wait
// on it), within statement_timeout.
func (s *Store) writeBatch(ctx context.Context, batch []*pendingSubmit) {
	n := len(batch)
	ids, users, convs := make([]string, n), make([]string, n), make([]string, n)
	assistants, userMsgs := make([]string, n), make([]string, n)
	contents, titles, preambles := make([]string, n), make([]string, n), make([]*string, n)
	for i, p := range batch {
		// Made in this order, the user message's UUIDv7 sorts before the
		// placeholder's; both share created_at.
		userMsg, err := uuid.NewV7()
		if err == nil {
			var assistant uuid.UUID
			assistant, err = uuid.NewV7()
			assistants[i] = assistant.String()
		}
		if err != nil {
			failBatch(batch, fmt.Errorf("make message id: %w", err))
			return
		}
		preambles[i] = p.preamble
		ids[i], users[i], convs[i] = p.req.TaskID, p.req.UserID, p.req.ConversationID
		userMsgs[i], contents[i], titles[i] = userMsg.String(), p.req.Content, title(p.req.Content)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StatementTimeout+connectTimeout)
	defer cancel()
	now := s.now()
	rows, err := s.pool.Query(ctx, submitBatch, ids, users, convs, assistants, userMsgs,
		contents, titles, preambles, now)
	written := map[string]bool{}
	if err == nil {
		for rows.Next() {
			var a string
			if err = rows.Scan(&a); err != nil {
				break
			}
			written[a] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && !unreachable(err):
		// The server refused the statement, so nothing was written: most
		// likely another user's conversation appeared meanwhile (the
		// composite key), or one submit broke a rule of the schema. Each
		// submit is then decided on its own, so one cannot fail the others.
		return
	case err != nil:
		// The database could not be reached, or not in time: the commit
		// may or may not have happened, and a submit sent again finds out.
		failBatch(batch, fmt.Errorf("insert tasks: %w", err))
		return
	}
	for i, p := range batch {
		p.written, p.at = written[assistants[i]], now
	}
}

func failBatch(batch []*pendingSubmit, err error) {
	for _, p := range batch {
		p.err = err
	}
}

// close fails the submits still queued; batches in flight finish (the pool's
// Close waits for their connections).
func (b *batcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, p := range b.queue {
		p.err = errClosed
		close(p.done)
	}
	b.queue = nil
}
