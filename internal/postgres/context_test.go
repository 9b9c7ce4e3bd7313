package postgres_test

import (
	"context"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestContext: a task's context is its conversation before its own user
// message, oldest first, the newest `limit` of it, and nothing of another
// conversation — also when every row shares one timestamp.
func TestContext(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{}) // the clock stands still: every row has one created_at
	ctx := context.Background()
	conv := newID()
	ids := []string{newID(), newID(), newID()}
	for i, id := range ids {
		submit(t, s, "ann", id, conv, []string{"first", "second", "third"}[i])
	}
	submit(t, s, "ann", newID(), newID(), "elsewhere")

	got, err := s.Context(ctx, ids[2], 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		role    task.Role
		content string
	}{{task.RoleUser, "first"}, {task.RoleAssistant, ""}, {task.RoleUser, "second"}, {task.RoleAssistant, ""}}
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Role != w.role || got[i].Content != w.content {
			t.Errorf("message %d: %s %q, want %s %q", i, got[i].Role, got[i].Content, w.role, w.content)
		}
	}

	got, err = s.Context(ctx, ids[2], 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Role != task.RoleAssistant || got[2].Content != "" || got[1].Content != "second" {
		t.Fatalf("limited context: %+v", got)
	}

	if got, err := s.Context(ctx, ids[0], 10); err != nil || len(got) != 0 {
		t.Fatalf("the first task has no context: %+v %v", got, err)
	}
	if _, err := s.Context(ctx, "nope", 10); task.ErrorCode(err) != task.CodeInvalid {
		t.Fatalf("bad id: %v", err)
	}
}
