package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/fakeclock"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/task"
)

// clockStart is the fake clock's first reading. It has nanoseconds, which the
// store must truncate to what Postgres keeps.
var clockStart = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)

// stored is what the store makes of a clock time.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// setup returns a store on its own schema, driven by a fake clock.
func setup(t testing.TB, cfg postgres.Config) (*postgres.Store, *fakeclock.Clock) {
	t.Helper()
	c := fakeclock.New(clockStart)
	cfg.Now = c.Now
	return pgtest.New(t, cfg), c
}

func newID() string { return uuid.NewString() }

// submit submits and fails the test on error.
func submit(t testing.TB, s *postgres.Store, user, taskID, convID, content string) task.SubmitResult {
	t.Helper()
	res, err := s.Submit(context.Background(), task.SubmitRequest{
		UserID: user, TaskID: taskID, ConversationID: convID, Content: content})
	if err != nil {
		t.Fatalf("submit %s: %v", taskID, err)
	}
	return res
}

// newTask submits a fresh task in a fresh conversation.
func newTask(t testing.TB, s *postgres.Store, user string) task.Task {
	t.Helper()
	return submit(t, s, user, newID(), newID(), "hello").Task
}

// claim claims a task for runner "r1" and fails the test on error.
func claim(t testing.TB, s *postgres.Store, id string) task.Task {
	t.Helper()
	got, err := s.Claim(context.Background(), task.Claim{TaskID: id, RunnerID: "r1"})
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	return got
}

// count runs a counting query.
func count(t testing.TB, s *postgres.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// rowCounts counts the rows of every table.
func rowCounts(t testing.TB, s *postgres.Store) [4]int {
	t.Helper()
	return [4]int{
		count(t, s, `SELECT count(*) FROM conversations`),
		count(t, s, `SELECT count(*) FROM messages`),
		count(t, s, `SELECT count(*) FROM tasks`),
		count(t, s, `SELECT count(*) FROM task_transitions`),
	}
}

// placeholder reads the assistant message of a task: content and status.
func placeholder(t testing.TB, s *postgres.Store, taskID string) (string, string) {
	t.Helper()
	var content, status string
	err := s.Pool().QueryRow(context.Background(), `
		SELECT m.content, m.status FROM messages m JOIN tasks t ON t.assistant_message_id = m.id
		WHERE t.id = $1`, taskID).Scan(&content, &status)
	if err != nil {
		t.Fatalf("read placeholder of %s: %v", taskID, err)
	}
	return content, status
}

// transitions lists a task's recorded moves as "from>to:reason".
func transitions(t testing.TB, s *postgres.Store, taskID string) []string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `
		SELECT coalesce(from_status, '') || '>' || to_status || ':' || reason
		FROM task_transitions WHERE task_id = $1 ORDER BY id`, taskID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code task.Code) {
	t.Helper()
	if got := task.ErrorCode(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}

// wantErr fails unless err wraps target.
func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func ptr[T any](v T) *T { return &v }
