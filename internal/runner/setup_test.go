package runner_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/fakeclock"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

const user = "user-1"

// env is one test's Postgres schema and NATS server.
type env struct {
	t     *testing.T
	store *postgres.Store
	bus   *natsbus.Bus
	clock *fakeclock.Clock
}

// testLease is both the store's and the runners' lease in these tests:
// heartbeats every 500 ms keep it with a wide margin under -race.
const testLease = 1500 * time.Millisecond

func setup(t *testing.T) *env {
	t.Helper()
	clock := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store := pgtest.New(t, postgres.Config{Lease: testLease, Now: clock.Now})
	url := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bus, err := natsbus.Connect(ctx, url, natsbus.Config{Name: t.Name(), FetchWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("connect NATS: %v", err)
	}
	t.Cleanup(bus.Close)
	return &env{t: t, store: store, bus: bus, clock: clock}
}

// submit creates a task with content and dispatches it.
func (e *env) submit(content string) task.Task {
	e.t.Helper()
	ctx := context.Background()
	res, err := e.store.Submit(ctx, task.SubmitRequest{UserID: user, TaskID: uuid.NewString(),
		ConversationID: uuid.NewString(), Content: content})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	if err := e.bus.Dispatch(ctx, res.Task.ID, res.Task.Attempt); err != nil {
		e.t.Fatalf("dispatch: %v", err)
	}
	return res.Task
}

// startRunner runs a runner until the test ends (or stop is called) and
// reports Run's error then.
func (e *env) startRunner(cfg runner.Config, store runner.Store) (stop func()) {
	e.t.Helper()
	if store == nil {
		store = e.store
	}
	cfg.Lease = testLease
	r, err := runner.New(cfg, store, natsrunner.New(e.bus))
	if err != nil {
		e.t.Fatalf("runner.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("runner.Run: %v", err)
				}
			case <-time.After(eventually.Deadline):
				e.t.Errorf("runner did not stop within %v", eventually.Deadline)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// waitStatus waits until the stored task has status want and, since
// Postgres is written before the status event is published, until the log
// holds the event at the stored seq.
func (e *env) waitStatus(id string, want task.Status) task.Task {
	e.t.Helper()
	var got task.Task
	eventually.True(e.t, "status "+string(want), func() bool {
		var err error
		got, err = e.store.Load(context.Background(), id)
		if err != nil {
			e.t.Fatalf("load: %v", err)
		}
		return got.Status == want
	})
	eventually.True(e.t, "the status event in the log", func() bool {
		m, ok, err := e.bus.LastEvent(context.Background(), id)
		return err == nil && ok && m.Event.Seq >= got.Seq
	})
	return got
}

// log reads the whole task log.
func (e *env) log(id string) []task.Event {
	e.t.Helper()
	msgs, err := e.bus.ReadLog(context.Background(), id, task.Position{}, 0)
	if err != nil {
		e.t.Fatalf("read log: %v", err)
	}
	events := make([]task.Event, len(msgs))
	for i, m := range msgs {
		events[i] = m.Event
	}
	return events
}

// checkLog checks the invariants every task log keeps: seq 1..n contiguous,
// nothing after an attempt's terminal status, and a stored snapshot that
// is exactly the fold of the log up to its seq.
func (e *env) checkLog(events []task.Event, stored task.Task) {
	e.t.Helper()
	var folded task.Task
	for i, ev := range events {
		if ev.Seq != int64(i+1) {
			e.t.Fatalf("event %d has seq %d: log is not contiguous", i, ev.Seq)
		}
		if i > 0 && events[i-1].Terminal() {
			e.t.Fatalf("event seq %d follows terminal status %s", ev.Seq, events[i-1].Status)
		}
		if ev.Seq <= stored.Seq {
			if step := folded.Apply(ev); step != task.StepNext && step != task.StepStart {
				e.t.Fatalf("event %+v does not continue attempt %d seq %d (step %d)", ev, folded.Attempt, folded.Seq, step)
			}
		}
	}
	if folded.Output != stored.Output || folded.Seq != stored.Seq {
		e.t.Fatalf("stored snapshot seq %d output %q; the log folds to seq %d output %q",
			stored.Seq, stored.Output, folded.Seq, folded.Output)
	}
}

// countingStore counts snapshot writes and can block them.
type countingStore struct {
	*postgres.Store
	snapshots atomic.Int64
	spent     atomic.Int64 // nanoseconds in SaveSnapshot
	mu        sync.Mutex
	saved     []task.Snapshot
}

func (s *countingStore) SaveSnapshot(ctx context.Context, sn task.Snapshot) error {
	start := time.Now()
	err := s.Store.SaveSnapshot(ctx, sn)
	s.spent.Add(int64(time.Since(start)))
	if err == nil {
		s.snapshots.Add(1)
		s.mu.Lock()
		s.saved = append(s.saved, sn)
		s.mu.Unlock()
	}
	return err
}

// stepEngine is a test engine driven by the test: it emits what it is sent
// on steps, and records how it ended.
type stepEngine struct {
	started chan string // task content, on each Run
	steps   chan string // text to emit; "" ends the run with nil
	ended   chan error  // the error Run returned
	// afterStop is what the engine tries to write once its ctx is done.
	afterStop chan error
}

func newStepEngine() *stepEngine {
	return &stepEngine{started: make(chan string, 8), steps: make(chan string), ended: make(chan error, 8),
		afterStop: make(chan error, 8)}
}

func (s *stepEngine) Run(ctx context.Context, in runnerInput, out runnerOutput) (err error) {
	defer func() { s.ended <- err }()
	s.started <- in.Content
	for {
		select {
		case <-ctx.Done():
			// A stale engine that does not notice at once still tries.
			s.afterStop <- out.Delta("stale ")
			return ctx.Err()
		case text := <-s.steps:
			if text == "" {
				return nil
			}
			if err := out.Delta(text); err != nil {
				return err
			}
		}
	}
}

func outputOf(events []task.Event) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Type == task.EventDelta {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}
