package postgres_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestUsersAreIsolated: every read and write of another user's ids answers
// exactly as a missing id, and changes nothing.
func TestUsersAreIsolated(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	pending := newTask(t, s, "alice")
	running := claim(t, s, newTask(t, s, "alice").ID)
	rows := rowCounts(t, s)

	sameAsMissing := func(t *testing.T, theirs, missing error) {
		t.Helper()
		wantCode(t, theirs, task.CodeNotFound)
		if task.ErrorMessage(theirs) != task.ErrorMessage(missing) {
			t.Fatalf("message %q differs from a missing id's %q",
				task.ErrorMessage(theirs), task.ErrorMessage(missing))
		}
	}
	for _, own := range []task.Task{pending, running} {
		_, theirs := s.Get(ctx, "mallory", own.ID)
		_, missing := s.Get(ctx, "mallory", newID())
		sameAsMissing(t, theirs, missing)

		_, theirs = s.Cancel(ctx, "mallory", own.ID)
		_, missing = s.Cancel(ctx, "mallory", newID())
		sameAsMissing(t, theirs, missing)

		_, _, theirs = s.History(ctx, "mallory", own.ConversationID, task.Page{})
		_, _, missing = s.History(ctx, "mallory", newID(), task.Page{})
		sameAsMissing(t, theirs, missing)
	}
	convs, next, err := s.Conversations(ctx, "mallory", task.Page{})
	if err != nil || len(convs) != 0 || next != "" {
		t.Fatalf("mallory's conversations: %v %q %v", convs, next, err)
	}
	// A cursor alice was given does not page mallory's list.
	for range 3 {
		newTask(t, s, "alice")
	}
	_, aliceNext, err := s.Conversations(ctx, "alice", task.Page{Limit: 1})
	if err != nil || aliceNext == "" {
		t.Fatal(err)
	}
	_, _, err = s.Conversations(ctx, "mallory", task.Page{Before: aliceNext})
	wantCode(t, err, task.CodeInvalid)

	if after := rowCounts(t, s); after[2] != rows[2]+3 || after[3] != rows[3]+3 {
		t.Fatalf("rows %v, were %v", after, rows)
	}
	if got, _ := s.Load(ctx, pending.ID); !reflect.DeepEqual(got, pending) {
		t.Fatalf("mallory changed alice's pending task: %+v", got)
	}
	if got, _ := s.Load(ctx, running.ID); got.CancelRequested {
		t.Fatalf("mallory cancelled alice's running task")
	}
}
