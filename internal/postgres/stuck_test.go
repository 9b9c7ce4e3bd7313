package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// A runner frozen while it held its task's row (here: a session named like
// runner r1's with a transaction left open on the row) must not keep the task
// from being handed over: maintenance ends that session once its
// transaction is half a lease old, and the next round takes the task.
func TestExpiredLeaseOfAFrozenRunnerHoldingTheRowIsHandedOver(t *testing.T) {
	t.Parallel()
	const lease = 200 * time.Millisecond
	s, clk := setup(t, postgres.Config{Lease: lease, ApplicationName: postgres.RunnerApplicationName("r1")})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)

	frozen, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Release()
	tx, err := frozen.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET progress = progress WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}

	clk.Advance(time.Minute)
	var handed []task.Task
	eventually.True(t, "the task held by the frozen session to be handed over", func() bool {
		handed, err = s.ExpireLeases(ctx, nil)
		if err != nil {
			t.Logf("expire leases: %v", err)
		}
		return len(handed) > 0
	})
	if h := handed[0]; h.ID != r.ID || h.Status != task.StatusPending || h.Attempt != 2 {
		t.Fatalf("handed over %+v", h)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the frozen session's transaction survived")
	}
}
