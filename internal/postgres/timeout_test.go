package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/task"
)

// holdRow starts a transaction that holds the rows query selects FOR
// UPDATE, as a stuck request or a frozen runner would, until the test ends
// or release is called.
func holdRow(t *testing.T, s *postgres.Store, query string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, query, args...); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("%s: %v", query, err)
	}
	release = func() { _ = tx.Rollback(ctx) }
	t.Cleanup(release)
	return release
}

// TestLockedRowIsUnavailable: with a task's row held FOR UPDATE by another
// transaction, a cancel, a resubmit and a claim of it return, answering
// unavailable (lock_timeout), instead of waiting for as long as the holder
// holds on; their context had time left. Released, the same calls work.
func TestLockedRowIsUnavailable(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t, postgres.Config{LockTimeout: 50 * time.Millisecond})
	// The test's own deadline: generous, and never what ends a call.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := task.SubmitRequest{UserID: "alice", TaskID: uuid.NewString(), ConversationID: uuid.NewString(), Content: "hi"}
	if _, err := s.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	release := holdRow(t, s, `SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE`, req.TaskID)

	_, err := s.Cancel(ctx, "alice", req.TaskID)
	wantUnavailable(t, ctx, "cancel", err)
	_, err = s.Submit(ctx, req)
	wantUnavailable(t, ctx, "resubmit", err)
	_, err = s.Claim(ctx, task.Claim{TaskID: req.TaskID, RunnerID: "r1"})
	wantUnavailable(t, ctx, "claim", err)

	release()
	if res, err := s.Cancel(ctx, "alice", req.TaskID); err != nil || !res.Cancelled {
		t.Fatalf("cancel once the row is free: %+v, %v", res, err)
	}
}

// TestLockedConversationIsUnavailable: a conversation held FOR UPDATE by
// another transaction makes a delete of it answer unavailable.
func TestLockedConversationIsUnavailable(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t, postgres.Config{LockTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := task.SubmitRequest{UserID: "alice", TaskID: uuid.NewString(), ConversationID: uuid.NewString(), Content: "hi"}
	if _, err := s.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	holdRow(t, s, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, req.ConversationID)
	err := s.DeleteConversation(ctx, "alice", req.ConversationID)
	wantUnavailable(t, ctx, "delete conversation", err)
}

// TestDeadlineIsUnavailable: with no lock_timeout to speak of, the caller's
// deadline ends the wait for a held row, and that too is unavailable.
func TestDeadlineIsUnavailable(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t, postgres.Config{LockTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := task.SubmitRequest{UserID: "alice", TaskID: uuid.NewString(), ConversationID: uuid.NewString(), Content: "hi"}
	if _, err := s.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	holdRow(t, s, `SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE`, req.TaskID)
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	_, err := s.Cancel(short, "alice", req.TaskID)
	wantUnavailable(t, ctx, "cancel past its deadline", err)
}

// TestStatementTimeoutIsUnavailable: a statement the server ends for
// running past statement_timeout is unavailable, not internal; a URL that
// sets its own statement_timeout keeps it.
func TestStatementTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t, postgres.Config{StatementTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var limit string
	if err := s.Pool().QueryRow(ctx, `SHOW statement_timeout`).Scan(&limit); err != nil || limit != "50ms" {
		t.Fatalf("statement_timeout %q, %v; want 50ms", limit, err)
	}
	// pg_sleep stands in for any statement that runs too long.
	_, err := s.Pool().Exec(ctx, `SELECT pg_sleep(60)`)
	if err == nil {
		t.Fatal("a minute's statement ran under a 50ms statement_timeout")
	}
	wantUnavailable(t, ctx, "long statement", postgres.Classify(err))

	own, err := postgres.Open(ctx, pgtest.URL(t)+"&statement_timeout=1234", postgres.Config{StatementTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.Pool().QueryRow(ctx, `SHOW statement_timeout`).Scan(&limit); err != nil || limit != "1234ms" {
		t.Fatalf("the URL's statement_timeout: %q, %v; want 1234ms", limit, err)
	}
}

func wantUnavailable(t *testing.T, ctx context.Context, what string, err error) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("%s: the test's own deadline passed", what)
	}
	if code := task.ErrorCode(err); code != task.CodeUnavailable {
		t.Fatalf("%s: code %q (%v), want unavailable", what, code, err)
	}
}
