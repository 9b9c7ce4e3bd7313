package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestBadInputWritesNothing: every malformed request is refused with its
// code before the database is touched.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	rows := rowCounts(t, s)
	before, _ := s.Load(ctx, r.ID)

	ok := task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "hi"}
	with := func(f func(*task.SubmitRequest)) task.SubmitRequest {
		req := ok
		f(&req)
		return req
	}
	submits := []struct {
		name string
		req  task.SubmitRequest
		code task.Code
	}{
		{"empty task id", with(func(r *task.SubmitRequest) { r.TaskID = "" }), task.CodeInvalid},
		{"task id not a uuid", with(func(r *task.SubmitRequest) { r.TaskID = "task-1" }), task.CodeInvalid},
		{"task id without hyphens", with(func(r *task.SubmitRequest) { r.TaskID = strings.ReplaceAll(newID(), "-", "") }), task.CodeInvalid},
		{"task id in braces", with(func(r *task.SubmitRequest) { r.TaskID = "{" + newID() + "}" }), task.CodeInvalid},
		{"task id with bad hex", with(func(r *task.SubmitRequest) { r.TaskID = "zzzzzzzz" + newID()[8:] }), task.CodeInvalid},
		{"conversation id not a uuid", with(func(r *task.SubmitRequest) { r.ConversationID = "c1" }), task.CodeInvalid},
		{"empty content", with(func(r *task.SubmitRequest) { r.Content = "" }), task.CodeInvalid},
		{"content too large", with(func(r *task.SubmitRequest) { r.Content = strings.Repeat("a", task.MaxContentBytes+1) }), task.CodeTooLarge},
		{"content not UTF-8", with(func(r *task.SubmitRequest) { r.Content = "a\xffb" }), task.CodeInvalid},
		{"content with NUL", with(func(r *task.SubmitRequest) { r.Content = "a\x00b" }), task.CodeInvalid},
		{"empty user", with(func(r *task.SubmitRequest) { r.UserID = "" }), task.CodeInvalid},
		{"user over 128 bytes", with(func(r *task.SubmitRequest) { r.UserID = strings.Repeat("u", 129) }), task.CodeInvalid},
		{"user not UTF-8", with(func(r *task.SubmitRequest) { r.UserID = "\xff" }), task.CodeInvalid},
	}
	for _, tc := range submits {
		_, err := s.Submit(ctx, tc.req)
		if task.ErrorCode(err) != tc.code {
			t.Errorf("submit, %s: %v, want %s", tc.name, err, tc.code)
		}
	}

	others := []struct {
		name string
		call func() error
		code task.Code
	}{
		{"get bad id", func() error { _, err := s.Get(ctx, "alice", "x"); return err }, task.CodeInvalid},
		{"get empty user", func() error { _, err := s.Get(ctx, "", r.ID); return err }, task.CodeInvalid},
		{"cancel bad id", func() error { _, err := s.Cancel(ctx, "alice", "x"); return err }, task.CodeInvalid},
		{"cancel long user", func() error { _, err := s.Cancel(ctx, strings.Repeat("u", 129), r.ID); return err }, task.CodeInvalid},
		{"history bad id", func() error { _, _, err := s.History(ctx, "alice", "x", task.Page{}); return err }, task.CodeInvalid},
		{"history bad cursor", func() error {
			_, _, err := s.History(ctx, "alice", r.ConversationID, task.Page{Before: "x"})
			return err
		}, task.CodeInvalid},
		{"conversations bad limit", func() error {
			_, _, err := s.Conversations(ctx, "alice", task.Page{Limit: 201})
			return err
		}, task.CodeInvalid},
		{"claim bad id", func() error { _, err := s.Claim(ctx, task.Claim{TaskID: "x", RunnerID: "r"}); return err }, task.CodeInvalid},
		{"claim no runner", func() error { _, err := s.Claim(ctx, task.Claim{TaskID: r.ID}); return err }, task.CodeInvalid},
		{"claim negative seq", func() error {
			_, err := s.Claim(ctx, task.Claim{TaskID: r.ID, RunnerID: "r", LastSeq: -1})
			return err
		}, task.CodeInvalid},
		{"heartbeat bad id", func() error { _, err := s.Heartbeat(ctx, "x", 1); return err }, task.CodeInvalid},
		{"snapshot backwards", func() error {
			return s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq - 1})
		}, task.CodeInvalid},
		{"snapshot progress 101", func() error {
			return s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 1, Progress: 101})
		}, task.CodeInvalid},
		{"snapshot not UTF-8", func() error {
			return s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 1, Append: "\xff"})
		}, task.CodeInvalid},
		{"finish not terminal", func() error {
			_, err := s.Finish(ctx, task.Finish{Status: task.StatusPending, Snapshot: task.Snapshot{
				TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 1}})
			return err
		}, task.CodeInvalid},
		{"finish failed without error", func() error {
			_, err := s.Finish(ctx, task.Finish{Status: task.StatusFailed, Snapshot: task.Snapshot{
				TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 1}})
			return err
		}, task.CodeInvalid},
		{"finish without its seq", func() error {
			_, err := s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
				TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq}})
			return err
		}, task.CodeInvalid},
		{"undispatched negative age", func() error { _, err := s.Undispatched(ctx, -1, 0); return err }, task.CodeInvalid},
	}
	for _, tc := range others {
		if err := tc.call(); task.ErrorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}

	if after := rowCounts(t, s); after != rows {
		t.Fatalf("rows %v, were %v: a refused request wrote", after, rows)
	}
	if after, _ := s.Load(ctx, r.ID); after != before {
		t.Fatalf("a refused request changed the task")
	}

	// The limits themselves are accepted.
	edge := with(func(r *task.SubmitRequest) {
		r.UserID, r.Content = strings.Repeat("u", 128), strings.Repeat("é", task.MaxContentBytes/2)
	})
	if _, err := s.Submit(ctx, edge); err != nil {
		t.Fatalf("submit at the limits: %v", err)
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(context.Background(), "postgres://127.0.0.1:1/x", postgres.Config{Lease: -1})
	if err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("open with a negative lease: %v", err)
	}
	_, err = postgres.Open(context.Background(), "postgres://u:secret@[::1", postgres.Config{})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("open with a bad URL: %v", err)
	}
}
