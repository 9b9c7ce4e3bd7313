package maintenance_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/syncbuffer"
)

// TestStepDeadline: with the tasks table held by another transaction (a
// migration rewriting it) and no lock_timeout to end the waits, each step of
// a round ends at its own deadline, is logged as a dependency that is down,
// and the round goes on to the next step and returns; its context had time
// left.
func TestStepDeadline(t *testing.T) {
	t.Parallel()
	store := pgtest.New(t, postgres.Config{LockTimeout: time.Hour, StatementTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), eventually.Deadline)
	defer cancel()
	bus, err := natsbus.Connect(ctx, natstest.Start(t), natsbus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)

	tx, err := store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}

	var logs syncbuffer.Buffer
	loop := &maintenance.Loop{Store: store, Bus: bus, StepTimeout: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	loop.Tick(ctx)
	if ctx.Err() != nil {
		t.Fatal("the round outlived the test's own deadline")
	}
	out := logs.String()
	for _, step := range []string{"expire pending tasks", "expire leases", "purge finished tasks", "find undispatched tasks"} {
		if !strings.Contains(out, "maintenance: "+step+" (retried next round)") {
			t.Errorf("no warning for the step %q; log:\n%s", step, out)
		}
	}
}
