package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestVersions: turns follow the newest turn by default; a regenerate or an
// edit (version_of) follows what the turn it redoes follows; parent_task_id
// places a turn after any turn; history says where each message's turn
// stands, and an engine's context follows the path, not the order of
// writing.
func TestVersions(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	conv := newID()
	a, b, c, d, e := newID(), newID(), newID(), newID(), newID()
	version := func(taskID, content, parent, versionOf string) (task.SubmitResult, error) {
		clk.Advance(time.Second)
		return s.SubmitVersion(ctx, task.SubmitRequest{UserID: "alice", TaskID: taskID, ConversationID: conv,
			Content: content, ParentTaskID: parent, VersionOf: versionOf})
	}
	submit(t, s, "alice", a, conv, "first question")
	clk.Advance(time.Second)
	submit(t, s, "alice", b, conv, "second question")
	if r, err := version(c, "second question", "", b); err != nil || !r.Created {
		t.Fatalf("regenerate b: %+v %v", r, err)
	}
	if r, err := version(d, "first question, edited", "", a); err != nil || !r.Created {
		t.Fatalf("edit a: %+v %v", r, err)
	}
	if r, err := version(e, "a follow-up to b", b, ""); err != nil || !r.Created {
		t.Fatalf("follow b: %+v %v", r, err)
	}
	// A repeat keeps its place and creates nothing.
	if r, err := version(c, "second question", "", b); err != nil || r.Created {
		t.Fatalf("repeat of c: %+v %v", r, err)
	}
	if r, err := s.Submit(ctx, task.SubmitRequest{UserID: "alice", TaskID: c, ConversationID: conv, Content: "second question"}); err != nil || r.Created {
		t.Fatalf("plain repeat of c: %+v %v", r, err)
	}

	msgs, _, err := s.History(ctx, "alice", conv, task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	parent := map[string]string{}
	for _, m := range msgs {
		p := "-"
		if m.ParentTaskID != nil {
			p = *m.ParentTaskID
		}
		if prev, ok := parent[*m.TaskID]; ok && prev != p {
			t.Fatalf("the messages of turn %s disagree: %s and %s", *m.TaskID, prev, p)
		}
		parent[*m.TaskID] = p
	}
	want := map[string]string{a: "-", b: a, c: a, d: "-", e: b}
	for id, p := range want {
		if parent[id] != p {
			t.Errorf("turn %s follows %s, want %s", id, parent[id], p)
		}
	}
	// The next plain submit follows the newest turn.
	f := newID()
	clk.Advance(time.Second)
	submit(t, s, "alice", f, conv, "plain")
	msgs, _, _ = s.History(ctx, "alice", conv, task.Page{})
	if last := msgs[len(msgs)-1]; last.ParentTaskID == nil || *last.ParentTaskID != e {
		t.Fatalf("a plain submit follows %v, want %s", last.ParentTaskID, e)
	}

	// Context follows the path: c (b's other version) sees a only; e sees a and b.
	contextOf := func(id string) []string {
		t.Helper()
		ms, err := s.Context(ctx, id, 50)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.Content)
		}
		return out
	}
	if got := contextOf(c); len(got) != 2 || got[0] != "first question" {
		t.Fatalf("context of c: %q", got)
	}
	if got := contextOf(e); len(got) != 4 || got[0] != "first question" || got[2] != "second question" {
		t.Fatalf("context of e: %q", got)
	}
	if got := contextOf(d); len(got) != 0 {
		t.Fatalf("context of d (a new first turn): %q", got)
	}

	// Refused: an unknown turn, one of another conversation or user, both fields.
	other := newID()
	submit(t, s, "bob", newID(), other, "bob's")
	for _, r := range []task.SubmitRequest{
		{UserID: "alice", TaskID: newID(), ConversationID: conv, Content: "x", VersionOf: newID()},
		{UserID: "bob", TaskID: newID(), ConversationID: other, Content: "x", ParentTaskID: a},
		{UserID: "alice", TaskID: newID(), ConversationID: conv, Content: "x", ParentTaskID: a, VersionOf: b},
		{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "x", VersionOf: a},
	} {
		if _, err := s.SubmitVersion(ctx, r); task.ErrorCode(err) != task.CodeInvalid {
			t.Errorf("%+v: %v, want invalid", r, err)
		}
		if _, err := s.Get(ctx, r.UserID, r.TaskID); task.ErrorCode(err) != task.CodeNotFound {
			t.Errorf("a refused version was created: %v", err)
		}
	}
}

// TestContextWithoutVersions: a conversation without versions gives its
// engine every earlier message, as before.
func TestContextWithoutVersions(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	conv := newID()
	var last string
	for _, q := range []string{"one", "two", "three"} {
		clk.Advance(time.Second)
		last = newID()
		submit(t, s, "alice", last, conv, q)
	}
	ms, err := s.Context(context.Background(), last, 50)
	if err != nil || len(ms) != 4 || ms[0].Content != "one" || ms[2].Content != "two" {
		t.Fatalf("context: %+v %v", ms, err)
	}
}
