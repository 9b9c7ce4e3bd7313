package runner_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

// leaderlessEnv is a runner on its own NATS server running a step task that
// has logged its first delta, with a way to have the task stream store
// nothing and refuse nothing, as a stream does while a NATS node that led
// it died and the cluster is electing (here its subjects are taken away),
// and listeners on the task's subject, as gateways are.
type leaderlessEnv struct {
	*env
	eng    *stepEngine
	tk     task.Task
	url    string
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    jetstream.StreamConfig
}

func setupLeaderless(t *testing.T) *leaderlessEnv {
	t.Helper()
	e := setup(t)
	url := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	eventually.Receive(t, eng.started, "the attempt to start")
	eng.steps <- "a "
	eventually.True(t, "the first delta in the log", func() bool { return len(e.log(tk.ID)) == 2 })

	js, err := jetstream.New(bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, natsbus.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	return &leaderlessEnv{env: e, eng: eng, tk: tk, url: url, js: js, stream: stream, cfg: stream.CachedInfo().Config}
}

// storing has the stream store the task's events (on) or drop them (off).
func (l *leaderlessEnv) storing(t *testing.T, on bool) {
	t.Helper()
	cfg := l.cfg
	if !on {
		cfg.Subjects = []string{"tether-test-nothing.>"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// listen returns the texts of the task's deltas as they go out live, from
// now on.
func (l *leaderlessEnv) listen(t *testing.T) <-chan string {
	t.Helper()
	nc, err := nats.Connect(l.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	live := make(chan string, 64)
	if _, err := nc.Subscribe(natsbus.TaskSubject(l.tk.ID), func(m *nats.Msg) {
		if ev, err := protocol.DecodeEvent(m.Data); err == nil && ev.Type == task.EventDelta {
			live <- ev.Text
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return live
}

// finish ends the answer with "d " and checks that the log is contiguous
// and exact.
func (l *leaderlessEnv) finish(t *testing.T) {
	t.Helper()
	l.eng.steps <- "d "
	l.eng.steps <- ""
	done := l.waitStatus(l.tk.ID, task.StatusDone)
	l.checkLog(l.log(l.tk.ID), done)
	if done.Attempt != 1 || done.Output != "a b c d " {
		t.Fatalf("attempt %d output %q", done.Attempt, done.Output)
	}
}

// While the task stream drops every publish, the answer goes on live, and
// once the stream stores again the events it dropped are stored by the
// runner publishing them again, long before the publish timeout and while
// the answer is still running: a gateway that missed them live reads them
// from the log. The log ends contiguous and exact.
func TestEventsAStreamDroppedAreStoredWhileTheAnswerGoesOn(t *testing.T) {
	t.Parallel()
	l := setupLeaderless(t)
	live := l.listen(t)
	l.storing(t, false)
	l.eng.steps <- "b "
	l.eng.steps <- "c "
	for _, want := range []string{"b ", "c "} {
		if got := eventually.Receive(t, live, "a live delta while the stream drops them"); got != want {
			t.Fatalf("live delta %q, want %q", got, want)
		}
	}
	l.storing(t, true)
	// The engine is held: the answer is still running.
	eventually.True(t, "the dropped deltas in the log", func() bool {
		return slices.Equal(deltaTexts(l.log(l.tk.ID)), []string{"a ", "b ", "c "})
	})
	l.finish(t)
}

// An event sent after a cut whose acks stopped is echoed while the cut is
// published again: a listener that came after it went out live (a gateway
// whose connection moved) gets it while the stream still drops everything,
// and does not wait for its own cut's turn.
func TestEventsAfterAStalledCutReachALateListener(t *testing.T) {
	t.Parallel()
	l := setupLeaderless(t)
	early := l.listen(t)
	l.storing(t, false)
	l.eng.steps <- "b "
	if got := eventually.Receive(t, early, "b live"); got != "b " {
		t.Fatalf("live delta %q, want b", got)
	}
	// b again: its cut's acks stopped and the runner publishes it again,
	// so what the engine sends now belongs to a later cut.
	awaitText(t, "b published again", early, "b ")
	l.eng.steps <- "c "
	awaitText(t, "c live", early, "c ")
	late := l.listen(t)
	awaitText(t, "c echoed to the late listener while the stream drops", late, "c ")
	l.storing(t, true)
	l.finish(t)
}

// awaitText waits, with a deadline, for want among the texts ch delivers,
// passing over others (events published again).
func awaitText(t *testing.T, what string, ch <-chan string, want string) {
	t.Helper()
	deadline := time.After(eventually.Deadline)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
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
