package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestLargeResultSpills: a finished output over ResultInlineMax leaves the
// task row for a stored result, readable by its owner only; one at the limit
// stays inline; the assistant message keeps the whole text either way.
func TestLargeResultSpills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, postgres.Config{ResultInlineMax: 10})
	for _, text := range []string{strings.Repeat("x", 10), "héllo wörld, this is long"} {
		tk := newTask(t, s, "ana")
		claimed := claim(t, s, tk.ID)
		done, err := s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
			TaskID: tk.ID, Attempt: 1, FromSeq: claimed.Seq, Seq: claimed.Seq + 2, Append: text}})
		if err != nil {
			t.Fatal(err)
		}
		msgs, _, err := s.History(ctx, "ana", tk.ConversationID, task.Page{})
		if err != nil || len(msgs) != 2 || msgs[1].Content != text {
			t.Fatalf("assistant message: %+v %v", msgs, err)
		}
		if len(text) <= 10 {
			if done.ResultRef != nil || done.Output != text {
				t.Fatalf("inline output: %+v", done)
			}
			continue
		}
		if done.ResultRef == nil || done.Output != "" {
			t.Fatalf("spilled task: output %q ref %v", done.Output, done.ResultRef)
		}
		if got, _ := s.Get(ctx, "ana", tk.ID); got.Output != "" || got.ResultRef == nil || *got.ResultRef != *done.ResultRef {
			t.Fatalf("stored task: %+v", got)
		}
		res, err := s.Result(ctx, "ana", *done.ResultRef)
		if err != nil || res.Content != text || res.TaskID != tk.ID {
			t.Fatalf("result: %+v %v", res, err)
		}
		if _, err := s.Result(ctx, "eve", *done.ResultRef); task.ErrorCode(err) != task.CodeNotFound {
			t.Fatalf("another user's result: %v", err)
		}
	}
	if _, err := s.Result(ctx, "ana", newID()); task.ErrorCode(err) != task.CodeNotFound {
		t.Fatalf("missing result: %v", err)
	}
	if _, err := s.Result(ctx, "ana", "nope"); task.ErrorCode(err) != task.CodeInvalid {
		t.Fatalf("malformed ref: %v", err)
	}
}
