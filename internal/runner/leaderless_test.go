package runner_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

// While the task stream stores nothing and refuses nothing (a NATS node that
// led it died and the cluster is electing; here its subjects are taken away
// while a gateway still listens on the task's subject), the answer goes on
// live, and once the stream stores again the events it dropped are stored
// by the runner publishing them again, long before the publish timeout and
// while the answer is still running: a gateway that missed them live reads
// them from the log. The log ends contiguous and exact.
func TestEventsAStreamDroppedAreStoredWhileTheAnswerGoesOn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The publish timeout is far beyond the test: only publishing again
	// before it can store the dropped events in time.
	bus, err := natsbus.Connect(ctx, url, natsbus.Config{Name: t.Name(), FetchWait: 200 * time.Millisecond,
		PublishAckTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	e.bus = bus

	eng := newStepEngine()
	r, err := runner.New(runner.Config{ID: "r1", Engine: eng, Lease: testLease,
		SnapshotInterval: 50 * time.Millisecond}, e.store, natsrunner.New(bus))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = r.Run(runCtx) }()
	tk := e.submit("step")
	recv(t, "the attempt to start", eng.started)
	eng.steps <- "a "
	waitFor(t, "the first delta in the log", func() bool { return len(e.log(tk.ID)) == 2 })

	// A listener on the task's subject, as a gateway is.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	live := make(chan string, 16)
	sub, err := nc.Subscribe(natsbus.TaskSubject(tk.ID), func(m *nats.Msg) {
		if ev, err := protocol.DecodeEvent(m.Data); err == nil && ev.Type == task.EventDelta {
			live <- ev.Text
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // test cleanup
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, natsbus.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	dropping := cfg
	dropping.Subjects = []string{"tether-test-nothing.>"}
	if _, err := js.UpdateStream(ctx, dropping); err != nil {
		t.Fatal(err)
	}

	eng.steps <- "b "
	eng.steps <- "c "
	for _, want := range []string{"b ", "c "} {
		if got := recv(t, "a live delta while the stream drops them", live); got != want {
			t.Fatalf("live delta %q, want %q", got, want)
		}
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// The engine is held: the answer is still running.
	waitFor(t, "the dropped deltas in the log", func() bool {
		return slices.Equal(deltaTexts(e.log(tk.ID)), []string{"a ", "b ", "c "})
	})
	eng.steps <- "d "
	eng.steps <- ""
	done := e.waitStatus(tk.ID, task.StatusDone)
	e.checkLog(e.log(tk.ID), done)
	if done.Attempt != 1 || done.Output != "a b c d " {
		t.Fatalf("attempt %d output %q", done.Attempt, done.Output)
	}
}

func deltaTexts(events []task.Event) []string {
	var out []string
	for _, ev := range events {
		if ev.Type == task.EventDelta {
			out = append(out, ev.Text)
		}
	}
	return out
}
