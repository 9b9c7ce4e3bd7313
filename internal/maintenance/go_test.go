package maintenance_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/syncbuffer"
	"github.com/tether-dev/tether/internal/task"
)

// TestGoReportsALoopThatCannotRun: a misconfigured loop is not a silent
// absence of maintenance: Go logs why and delivers the error to its owner,
// then closes the channel.
func TestGoReportsALoopThatCannotRun(t *testing.T) {
	t.Parallel()
	for name, loop := range map[string]*maintenance.Loop{
		"no store":          {},
		"negative interval": {Store: nopMaintainer{}, Bus: nopBus{}, Interval: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs syncbuffer.Buffer
			loop.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			done := loop.Go(context.Background())
			err := eventually.Receive(t, done, "the loop's error")
			if err == nil || !strings.Contains(err.Error(), "maintenance:") {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(logs.String(), "maintenance loop stopped") || !strings.Contains(logs.String(), err.Error()) {
				t.Fatalf("the failure is not in the log:\n%s", logs.String())
			}
			select {
			case _, open := <-done:
				if open {
					t.Fatal("a second value after the error")
				}
			case <-time.After(eventually.Deadline):
				t.Fatal("the channel was not closed")
			}
		})
	}
}

// The loop never calls these: it refuses to run first.
type (
	nopMaintainer struct{ task.Maintainer }
	nopBus        struct{ maintenance.Bus }
)
