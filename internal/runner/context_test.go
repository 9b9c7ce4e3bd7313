package runner_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
)

// historyEngine answers "ok" and records the history each run was given.
type historyEngine struct{ seen chan []task.Message }

func (h historyEngine) Run(ctx context.Context, in engine.Input, out engine.Output) error {
	h.seen <- in.History
	return out.Delta("ok")
}

// TestEngineGetsConversation: an engine is given the conversation before the
// task, oldest first, with earlier answers filled in.
func TestEngineGetsConversation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := historyEngine{seen: make(chan []task.Message, 4)}
	e.startRunner(runner.Config{Engine: h}, nil)
	conv := uuid.NewString()
	ctx := context.Background()
	for i, content := range []string{"first question", "second question"} {
		res, err := e.store.Submit(ctx, task.SubmitRequest{UserID: user, TaskID: uuid.NewString(),
			ConversationID: conv, Content: content})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.bus.Dispatch(ctx, res.Task.ID, res.Task.Attempt); err != nil {
			t.Fatal(err)
		}
		hist := eventually.Receive(t, h.seen, "a run")
		if len(hist) != 2*i {
			t.Fatalf("run %d got %d messages of history, want %d", i, len(hist), 2*i)
		}
		if i == 1 && (hist[0].Content != "first question" || hist[1].Role != task.RoleAssistant || hist[1].Content != "ok") {
			t.Fatalf("history: %+v", hist)
		}
		e.waitStatus(res.Task.ID, task.StatusDone)
	}
}
