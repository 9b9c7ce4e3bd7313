package runner_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
)

// stuckClaim is a store whose first claim hangs, as one waiting on a row
// another transaction holds, until its context ends; it reports how.
type stuckClaim struct {
	*postgres.Store
	calls atomic.Int32
	ended chan error
}

func (s *stuckClaim) Claim(ctx context.Context, c task.Claim) (task.Task, error) {
	if s.calls.Add(1) == 1 {
		<-ctx.Done()
		s.ended <- ctx.Err()
		return task.Task{}, task.Unavailable("database", ctx.Err())
	}
	return s.Store.Claim(ctx, c)
}

// TestClaimDeadline: a claim that hangs ends at the claim deadline while
// the runner runs on; the dispatch comes back and the task is claimed and
// run by the next try.
func TestClaimDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t)
	store := &stuckClaim{Store: e.store, ended: make(chan error, 1)}
	e.startRunner(runner.Config{ClaimTimeout: 100 * time.Millisecond}, store)
	tk := e.submit("/stream 2 0")
	if err := eventually.Receive(t, store.ended, "the hung claim to end"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the hung claim ended with %v, want its deadline", err)
	}
	e.waitStatus(tk.ID, task.StatusDone)
}
