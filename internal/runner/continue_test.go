package runner_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/engine/enginetest"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/fakeclock"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

// loseRunner lets a runner stream until the log holds at least deltas
// deltas of tk, then takes it away without a word (as a kill would: it is
// abandoned, writing nothing more), and lets maintenance hand the task over
// once the store's clock is past the lease. It returns the new attempt's
// pending task.
func (e *env) loseRunner(tk task.Task, cfg runner.Config, deltas int) task.Task {
	e.t.Helper()
	cfg.DrainTimeout = time.Millisecond
	stop := e.startRunner(cfg, nil)
	eventually.True(e.t, "the first deltas", func() bool { return len(e.log(tk.ID)) > deltas })
	stop()
	e.logBarrier()
	e.clock.Advance(time.Hour)
	(&maintenance.Loop{Store: e.store, Bus: e.bus}).Tick(context.Background())
	handed, err := e.store.Load(context.Background(), tk.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	if handed.Status != task.StatusPending || handed.Attempt != 2 {
		e.t.Fatalf("after the lost runner: %s attempt %d", handed.Status, handed.Attempt)
	}
	return handed
}

// logBarrier returns once every event the test's runners published on
// e.bus is stored in the log. The last publishes of a runner that was just
// stopped may still be on their way (sent, asynchronously, while it held
// its lease); a hand-over that reads the log before they land numbers the
// next attempt after a shorter log, and the lost attempt's last event then
// shares a seq with the next one's first. Readers drop it as stale, but the
// log is then not the contiguous one checkLog asserts ("event 53 has seq
// 52"). In a real system the hand-over comes a lease after the last
// heartbeat, long after such a publish landed; the test's clock jumps the
// lease at once, so it waits for them: JetStream stores one connection's
// publishes to a stream in the order they came, so once a publish sent
// after them is acknowledged, they are stored.
func (e *env) logBarrier() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventually.Deadline)
	defer cancel()
	barrier := task.Event{Type: task.EventStatus, TaskID: uuid.NewString(), Seq: 1, Attempt: 1, Status: task.StatusPending}
	if _, err := e.bus.PublishEventSync(ctx, barrier); err != nil {
		e.t.Fatalf("log barrier: %v", err)
	}
}

// A runner lost mid-answer is replaced by an attempt that keeps what the
// log holds and continues at the next token: the answer is exactly the one
// an uninterrupted run gives, and no byte of it is produced twice.
func TestLostRunnersAnswerIsContinued(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tk := e.submit("/stream 300 3")
	handed := e.loseRunner(tk, runner.Config{ID: "lost"}, 40)
	full := enginetest.StreamText(300)
	if handed.Keep == 0 || handed.Keep != len(handed.Output) || !strings.HasPrefix(full, handed.Output) {
		t.Fatalf("handed over keeping %d bytes %q", handed.Keep, handed.Output)
	}

	e.startRunner(runner.Config{ID: "next"}, nil)
	done := e.waitStatus(tk.ID, task.StatusDone)
	events := e.log(tk.ID)
	e.checkLog(events, done)
	if done.Output != full || done.Attempt != 2 {
		t.Fatalf("attempt %d output %q", done.Attempt, done.Output)
	}
	var second strings.Builder
	for _, ev := range events {
		switch {
		case ev.Attempt == 2 && ev.Type == task.EventDelta:
			second.WriteString(ev.Text)
		case ev.Attempt == 2 && ev.StartsAttempt() && ev.Keep != handed.Keep:
			t.Fatalf("attempt 2's %s event keeps %d, want %d", ev.Status, ev.Keep, handed.Keep)
		}
	}
	if handed.Output+second.String() != full {
		t.Fatalf("attempt 2 wrote %d bytes after a %d-byte prefix; together they are not the answer",
			second.Len(), handed.Keep)
	}
}

// cannotContinue is an engine like a model server without prefill: it
// refuses a kept prefix and otherwise answers as the demo engine does.
type cannotContinue struct{ engine.Demo }

func (c *cannotContinue) Run(ctx context.Context, in engine.Input, out engine.Output) error {
	if in.Prefix != "" {
		return fmt.Errorf("no prefill here: %w", engine.ErrCannotContinue)
	}
	return c.Demo.Run(ctx, in, out)
}

// An engine that cannot continue starts the answer over as a new attempt
// whose first event keeps nothing, so every tab clears the kept text.
func TestEngineThatCannotContinueStartsOver(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tk := e.submit("/stream 100 3")
	e.loseRunner(tk, runner.Config{ID: "lost"}, 20)

	e.startRunner(runner.Config{ID: "no-prefill", Engine: &cannotContinue{}}, nil)
	done := e.waitStatus(tk.ID, task.StatusDone)
	events := e.log(tk.ID)
	e.checkLog(events, done)
	if done.Output != enginetest.StreamText(100) || done.Attempt != 3 {
		t.Fatalf("attempt %d output %q", done.Attempt, done.Output)
	}
	var starts []string
	for _, ev := range events {
		if ev.StartsAttempt() {
			starts = append(starts, fmt.Sprintf("%s %d keep>0=%v", ev.Status, ev.Attempt, ev.Keep > 0))
		}
	}
	want := "running 1 keep>0=false|pending 2 keep>0=true|running 2 keep>0=true|pending 3 keep>0=false|running 3 keep>0=false"
	if got := strings.Join(starts, "|"); got != want {
		t.Fatalf("attempt starts:\n%s\nwant:\n%s", got, want)
	}
}

// A NATS outage longer than the publish ack timeout is a pause: the runner
// keeps its lease in Postgres and its events in memory, publishes them again
// when the server is back, and the answer finishes on the same attempt,
// exact and with a contiguous log.
func TestNATSOutageIsAPause(t *testing.T) {
	t.Parallel()
	e := setup(t)
	store := t.TempDir()
	srv, err := natsbus.StartServer(natsbus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bus, err := natsbus.Connect(ctx, srv.ClientURL(), natsbus.Config{Name: "outage",
		FetchWait: 200 * time.Millisecond, PublishAckTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	e.bus = bus

	tk := e.submit("/stream 150 20")
	e.startRunner(runner.Config{ID: "r1"}, nil)
	eventually.True(t, "the first deltas", func() bool { return len(e.log(tk.ID)) > 20 })

	srv.Shutdown()
	srv.WaitForShutdown()
	// The outage itself: three ack timeouts and two leases long.
	time.Sleep(3 * time.Second)
	srv, err = natsbus.StartServer(natsbus.ServerConfig{Listen: addr, StoreDir: store})
	if err != nil {
		t.Fatalf("restart NATS on %s: %v", addr, err)
	}

	done := e.waitStatus(tk.ID, task.StatusDone)
	events := e.log(tk.ID)
	e.checkLog(events, done)
	if done.Attempt != 1 || done.Output != enginetest.StreamText(150) {
		t.Fatalf("attempt %d output %q", done.Attempt, done.Output)
	}
}

// cutOffStore fails every heartbeat while cut is set, as a runner cut off
// from Postgres (but not from NATS) sees.
type cutOffStore struct {
	runner.Store
	cut atomic.Bool
}

func (s *cutOffStore) Heartbeat(ctx context.Context, taskID string, attempt int) (bool, error) {
	if s.cut.Load() {
		return false, errors.New("connection to Postgres lost")
	}
	return s.Store.Heartbeat(ctx, taskID, attempt)
}

// cutOff is a runner with its own clock and a store that can be cut off, on
// a step engine that has written "before " to tk.
type cutOff struct {
	*env
	r     *runner.Runner
	clock *fakeclock.Clock
	eng   *stepEngine
	store *cutOffStore
	tk    task.Task
	// paused receives when the runner logs that an attempt pauses (its
	// lease past the quiet point): the runner's own word that a write now
	// waits, so a test need not wait a while to see that nothing happens.
	paused <-chan struct{}
}

func startCutOff(t *testing.T) *cutOff {
	t.Helper()
	e := setup(t)
	clock := fakeclock.New(time.Now())
	eng := newStepEngine()
	store := &cutOffStore{Store: e.store}
	paused := make(chan struct{}, 1)
	log := slog.New(&onMessage{prefix: "no heartbeat succeeded for most of the lease: pausing", c: paused})
	r, err := runner.New(runner.Config{ID: "r1", Engine: eng, Lease: testLease, Now: clock.Now, Logger: log},
		store, natsrunner.New(e.bus))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = r.Run(ctx) }()
	tk := e.submit("step")
	eventually.Receive(t, eng.started, "the attempt to start")
	eng.steps <- "before "
	eventually.True(t, "the first delta in the log", func() bool { return len(e.log(tk.ID)) == 2 })
	return &cutOff{env: e, r: r, clock: clock, eng: eng, store: store, tk: tk, paused: paused}
}

// onMessage is a log handler that signals c (without blocking) for each
// record whose message starts with prefix, and drops every record.
type onMessage struct {
	prefix string
	c      chan<- struct{}
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *onMessage) WithGroup(string) slog.Handler            { return h }
func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		select {
		case h.c <- struct{}{}:
		default:
		}
	}
	return nil
}

// A runner that cannot renew its lease goes quiet on its own before the
// lease runs out: MaySend, the bus's write gate, shuts (so nothing the NATS
// client buffered leaves) and the engine's next write waits, paused. When no
// heartbeat has succeeded for a lease past the lease's end, the write is
// refused, the attempt ends without a word, and the gate opens again.
func TestRunnerCutOffFromPostgresGoesQuiet(t *testing.T) {
	t.Parallel()
	c := startCutOff(t)
	if !c.r.MaySend() {
		t.Fatal("a runner holding its lease may not send")
	}

	c.store.cut.Store(true)
	// Four fifths of a lease without a heartbeat: the runner must be quiet
	// now, a fifth of a lease before anyone may take the task over.
	c.clock.Advance(testLease * 4 / 5)
	if c.r.MaySend() {
		t.Fatal("a runner about to lose its lease may still send")
	}
	c.eng.steps <- "after "
	eventually.Receive(t, c.paused, "the write to pause")
	select {
	case err := <-c.eng.ended:
		t.Fatalf("the attempt ended while paused, before its lease lapsed: %v", err)
	default:
	}
	// A lease past the end of the lease: it gives up.
	c.clock.Advance(testLease*6/5 + time.Millisecond)
	if err := eventually.Receive(t, c.eng.ended, "the attempt to end"); err == nil {
		t.Fatal("a delta was accepted after the runner went quiet")
	}
	eventually.True(t, "the gate to open again", c.r.MaySend)
	for _, ev := range c.log(c.tk.ID) {
		if ev.Type == task.EventDelta && ev.Text != "before " {
			t.Fatalf("logged %q after the runner went quiet", ev.Text)
		}
	}
}

// A runner cut off from Postgres past its quiet point pauses, and when a
// heartbeat succeeds again (nobody could take the task over meanwhile) it
// resumes the same attempt where it was: the write that waited goes out, and
// the answer ends on attempt 1 with nothing lost or doubled.
func TestRunnerPausedByAnOutageResumes(t *testing.T) {
	t.Parallel()
	c := startCutOff(t)

	c.store.cut.Store(true)
	c.clock.Advance(testLease * 9 / 10) // past the quiet point, not past the lease
	if c.r.MaySend() {
		t.Fatal("a paused runner may still send")
	}
	c.eng.steps <- "after "
	eventually.Receive(t, c.paused, "the write to pause")
	select {
	case err := <-c.eng.ended:
		t.Fatalf("the attempt ended while paused: %v", err)
	default:
	}
	if out := outputOf(c.log(c.tk.ID)); out != "before " {
		t.Fatalf("logged %q while paused", out)
	}
	c.store.cut.Store(false) // Postgres is back
	eventually.True(t, "the paused write to go out", func() bool { return outputOf(c.log(c.tk.ID)) == "before after " })
	if !c.r.MaySend() {
		t.Fatal("the gate did not open after a heartbeat succeeded")
	}
	c.eng.steps <- ""
	done := c.waitStatus(c.tk.ID, task.StatusDone)
	if done.Attempt != 1 || done.Output != "before after " {
		t.Fatalf("attempt %d output %q", done.Attempt, done.Output)
	}
}
