package runner_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

// stallBus hands out publishers whose Publish of a delta blocks while the
// gate is shut: NATS slow to take a publish.
type stallBus struct {
	runner.Bus
	shut    atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func (b *stallBus) NewPublisher() runner.Publisher {
	return stallPublisher{Publisher: b.Bus.NewPublisher(), b: b}
}

type stallPublisher struct {
	runner.Publisher
	b *stallBus
}

func (p stallPublisher) Publish(events ...task.Event) error {
	if events[0].Type == task.EventDelta && p.b.shut.Load() {
		p.b.entered <- struct{}{}
		<-p.b.open
	}
	return p.Publisher.Publish(events...)
}

// beatingStore counts successful heartbeats.
type beatingStore struct {
	*postgres.Store
	beats atomic.Int64
}

func (s *beatingStore) Heartbeat(ctx context.Context, id string, attempt int) (bool, error) {
	c, err := s.Store.Heartbeat(ctx, id, attempt)
	if err == nil {
		s.beats.Add(1)
	}
	return c, err
}

// A publish that stalls holds up neither the heartbeat nor anything else
// that takes the attempt's lock: the event is handed to NATS outside it. The
// answer is whole and in order once the publish goes through.
func TestStalledPublishDoesNotHoldTheAttempt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	eng := newStepEngine()
	store := &beatingStore{Store: e.store}
	bus := &stallBus{Bus: natsrunner.New(e.bus), entered: make(chan struct{}), open: make(chan struct{})}
	r, err := runner.New(runner.Config{ID: "stall", Engine: eng, Lease: testLease}, store, bus)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var release sync.Once
	open := func() { release.Do(func() { bus.shut.Store(false); close(bus.open) }) }
	defer open() // before the runner is stopped, if the test fails early

	tk := e.submit("stall")
	eventually.Receive(t, eng.started, "the engine to start")
	eng.steps <- "one "
	bus.shut.Store(true)
	go func() { eng.steps <- "two " }()
	eventually.Receive(t, bus.entered, "a publish to stall")
	from := store.beats.Load()
	eventually.True(t, "heartbeats while the publish stalls", func() bool { return store.beats.Load() >= from+2 })

	open()
	eng.steps <- "three "
	eng.steps <- ""
	got := e.waitStatus(tk.ID, task.StatusDone)
	if got.Output != "one two three " {
		t.Fatalf("output %q", got.Output)
	}
	e.checkLog(e.log(tk.ID), got)
}
