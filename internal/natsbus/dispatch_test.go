package natsbus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
)

func taskID(i int) string { return fmt.Sprintf("0190f3c4-5b6a-7c8d-9e0f-%012d", i) }

// consume runs b.Consume in the background until the test ends or stop is
// called; stop waits for Consume to return and reports its error.
func consume(t *testing.T, b *natsbus.Bus, capacity int, h natsbus.Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Consume(ctx, capacity, h) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-errc })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func dispatchInfo(t *testing.T, url string) *jetstream.ConsumerInfo {
	t.Helper()
	b := connect(t, url)
	js, err := jetstream.New(b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctxT(t), natsbus.DispatchStream, natsbus.RunnersConsumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestDispatchExactlyOnce(t *testing.T) {
	t.Parallel()
	gw, url := setup(t)
	r1, r2 := connect(t, url), connect(t, url)
	ctx := ctxT(t)

	var mu sync.Mutex
	got := map[string][]string{} // task id -> runners that took it
	var total atomic.Int32
	handler := func(name string) natsbus.Handler {
		return func(_ context.Context, d natsbus.Dispatch) (func(), error) {
			mu.Lock()
			got[d.TaskID] = append(got[d.TaskID], name)
			mu.Unlock()
			if d.Attempt != 1 || d.Deliveries != 1 {
				t.Errorf("dispatch %+v", d)
			}
			return func() { total.Add(1) }, nil
		}
	}
	stop1 := consume(t, r1, 2, handler("r1"))
	stop2 := consume(t, r2, 2, handler("r2"))

	const n = 40
	for i := range n {
		if err := gw.Dispatch(ctx, taskID(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	// The same attempt dispatched again is dropped.
	if err := gw.Dispatch(ctx, taskID(0), 1); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "all dispatches run", func() bool { return total.Load() == n })
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d tasks taken, want %d", len(got), n)
	}
	for id, runners := range got {
		if len(runners) != 1 {
			t.Errorf("task %s taken by %v", id, runners)
		}
	}
	if info := dispatchInfo(t, url); info.NumPending != 0 || info.NumAckPending != 0 {
		t.Fatalf("queue not empty: pending %d, ack pending %d", info.NumPending, info.NumAckPending)
	}
}

// A runner at capacity leaves dispatches in the queue for others.
func TestConsumeRespectsCapacity(t *testing.T) {
	t.Parallel()
	b, url := setup(t)
	ctx := ctxT(t)
	started := make(chan string, 2)
	release := make(chan struct{})
	stop := consume(t, b, 1, func(_ context.Context, d natsbus.Dispatch) (func(), error) {
		return func() { started <- d.TaskID; <-release }, nil
	})
	for i := range 2 {
		if err := b.Dispatch(ctx, taskID(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	first := <-started
	// The one slot is held by the first run, so the loop cannot have pulled
	// the second dispatch: it is still waiting in the queue, undelivered.
	if info := dispatchInfo(t, url); info.NumPending != 1 || info.NumAckPending != 0 {
		t.Fatalf("pending %d, ack pending %d; want 1, 0", info.NumPending, info.NumAckPending)
	}
	release <- struct{}{}
	second := <-started
	if first == second {
		t.Fatalf("%s ran twice", first)
	}
	close(release)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Stopping Consume takes no new work but lets the running work finish.
func TestConsumeStopWaitsForRuns(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	started := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	stop := consume(t, b, 4, func(ctx context.Context, d natsbus.Dispatch) (func(), error) {
		return func() {
			close(started)
			<-release
			if ctx.Err() != nil {
				t.Error("run context cancelled by the stop")
			}
			finished.Store(true)
		}, nil
	})
	if err := b.Dispatch(ctxT(t), taskID(1), 1); err != nil {
		t.Fatal(err)
	}
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case <-stopped:
		t.Fatal("Consume returned while a run was in flight")
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Consume returned before the run finished")
	}
}

// A handler error sends the dispatch back for another try.
func TestConsumeRedeliversOnHandlerError(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	deliveries := make(chan uint64, 4)
	consume(t, b, 1, func(_ context.Context, d natsbus.Dispatch) (func(), error) {
		deliveries <- d.Deliveries
		if d.Deliveries == 1 {
			return nil, errors.New("store down")
		}
		return nil, nil
	})
	if err := b.Dispatch(ctxT(t), taskID(7), 2); err != nil {
		t.Fatal(err)
	}
	if d := <-deliveries; d != 1 {
		t.Fatalf("first delivery numbered %d", d)
	}
	if d := <-deliveries; d != 2 {
		t.Fatalf("second delivery numbered %d", d)
	}
}

func TestConsumeBadCapacity(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	if err := b.Consume(ctxT(t), 0, nil); err == nil {
		t.Fatal("capacity 0 accepted")
	}
}
