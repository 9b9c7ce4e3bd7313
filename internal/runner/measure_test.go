package runner_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
)

// TestMeasureThroughput reports events per second through one runner for
// /stream 100000 0, and snapshot writes per second. Opt-in (it is a
// measurement, not a check): TETHER_MEASURE=1 go test -run Measure -v.
func TestMeasureThroughput(t *testing.T) {
	if os.Getenv("TETHER_MEASURE") == "" {
		t.Skip("set TETHER_MEASURE=1 to measure")
	}
	e := setup(t)
	counting := &countingStore{Store: e.store}
	e.startRunner(runner.Config{ID: "measure"}, counting)
	tk := e.submit("/stream 100000 0")

	var running task.Task
	eventually.True(t, "running", func() bool {
		running, _ = e.store.Load(context.Background(), tk.ID)
		return running.Status != task.StatusPending
	})
	start := time.Now()
	done := e.waitStatus(tk.ID, task.StatusDone)
	elapsed := time.Since(start)
	events := done.Seq - running.Seq
	snaps := counting.snapshots.Load()
	t.Logf("%d events in %v: %.0f events/s; %d snapshot writes, %.1f/s, %.0f events each",
		events, elapsed.Round(time.Millisecond), float64(events)/elapsed.Seconds(),
		snaps, float64(snaps)/elapsed.Seconds(), float64(events)/float64(max(snaps, 1)))
	t.Logf("time in SaveSnapshot: %v", time.Duration(counting.spent.Load()).Round(time.Millisecond))
	if done.Output == "" || len(e.log(tk.ID)) != int(done.Seq) {
		t.Fatal("log and snapshot disagree")
	}
}
