package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/fakeclock"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/task"
)

type env struct {
	store *postgres.Store
	bus   *natsbus.Bus
	clock *fakeclock.Clock
	loop  *maintenance.Loop
}

func setup(t *testing.T) *env {
	t.Helper()
	clock := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store := pgtest.New(t, postgres.Config{Lease: 15 * time.Second, PendingTimeout: time.Minute, Now: clock.Now})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bus, err := natsbus.Connect(ctx, natstest.Start(t), natsbus.Config{FetchWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	return &env{store: store, bus: bus, clock: clock, loop: &maintenance.Loop{Store: store, Bus: bus}}
}

func (e *env) submit(t *testing.T, content string) task.Task {
	t.Helper()
	res, err := e.store.Submit(context.Background(), task.SubmitRequest{UserID: "u", TaskID: uuid.NewString(),
		ConversationID: uuid.NewString(), Content: content})
	if err != nil {
		t.Fatal(err)
	}
	return res.Task
}

func (e *env) log(t *testing.T, id string) []task.Event {
	t.Helper()
	msgs, err := e.bus.ReadLog(context.Background(), id, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]task.Event, len(msgs))
	for i, m := range msgs {
		out[i] = m.Event
	}
	return out
}

// nextDispatch pulls one dispatch from the work queue.
func (e *env) nextDispatch(t *testing.T) natsbus.Dispatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan natsbus.Dispatch, 1)
	go func() {
		_ = e.bus.Consume(ctx, 1, func(_ context.Context, d natsbus.Dispatch) (func(), error) {
			select {
			case got <- d:
				cancel()
			default:
			}
			return nil, nil
		})
	}()
	select {
	case d := <-got:
		return d
	case <-ctx.Done():
		t.Fatal("no dispatch queued")
		panic("unreachable")
	}
}

func TestPendingTooLongFailsWithNoRunner(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tk := e.submit(t, "hello")
	e.loop.Tick(context.Background())
	if got, _ := e.store.Load(context.Background(), tk.ID); got.Status != task.StatusPending {
		t.Fatalf("failed before the pending timeout: %s", got.Status)
	}

	e.clock.Advance(61 * time.Second)
	e.loop.Tick(context.Background())
	got, err := e.store.Load(context.Background(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.StatusFailed || got.Error == nil || *got.Error != task.ErrNoRunner {
		t.Fatalf("stored %s %v, want failed no_runner", got.Status, got.Error)
	}
	events := e.log(t, tk.ID)
	if len(events) != 1 || events[0].Status != task.StatusFailed || *events[0].Error != task.ErrNoRunner ||
		events[0].Seq != got.Seq {
		t.Fatalf("log %+v, want one failed no_runner event at seq %d", events, got.Seq)
	}
}

// A runner claimed, published events it never snapshotted and died: the
// new attempt is numbered after the whole log and dispatched.
func TestExpiredLeaseContinuesAfterTheLog(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	tk := e.submit(t, "/stream 10 0")
	claimed, err := e.store.Claim(ctx, task.Claim{TaskID: tk.ID, RunnerID: "dead", LastSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	pub := e.bus.NewPublisher()
	_ = pub.Publish(task.StatusEvent(claimed))
	for i, text := range []string{"t1 ", "t2 ", "t3 "} {
		_ = pub.Publish(task.Event{Type: task.EventDelta, TaskID: tk.ID, Seq: claimed.Seq + int64(i) + 1, Attempt: 1, Text: text})
	}
	if _, err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// seq 1 running, 2..4 deltas; Postgres still says seq 1.

	e.loop.Tick(ctx) // lease not expired yet: nothing happens
	if got, _ := e.store.Load(ctx, tk.ID); got.Status != task.StatusRunning {
		t.Fatalf("taken before the lease expired: %s", got.Status)
	}
	e.clock.Advance(16 * time.Second)
	e.loop.Tick(ctx)

	got, err := e.store.Load(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.StatusPending || got.Attempt != 2 || got.Seq != 5 ||
		got.Output != "t1 t2 t3 " || got.Keep != len("t1 t2 t3 ") {
		t.Fatalf("stored %s attempt %d seq %d output %q keep %d, want pending attempt 2 seq 5 keeping t1..t3",
			got.Status, got.Attempt, got.Seq, got.Output, got.Keep)
	}
	events := e.log(t, tk.ID)
	last := events[len(events)-1]
	if len(events) != 5 || last.Seq != 5 || last.Status != task.StatusPending || last.Attempt != 2 ||
		last.Keep != len("t1 t2 t3 ") {
		t.Fatalf("log %+v", events)
	}
	if d := e.nextDispatch(t); d.TaskID != tk.ID || d.Attempt != 2 {
		t.Fatalf("dispatch %+v, want task %s attempt 2", d, tk.ID)
	}
	// The next claim numbers after the log.
	again, err := e.store.Claim(ctx, task.Claim{TaskID: tk.ID, RunnerID: "next", LastSeq: last.Seq})
	if err != nil || again.Seq != 6 || again.Attempt != 2 {
		t.Fatalf("claim: seq %d attempt %d err %v", again.Seq, again.Attempt, err)
	}
}

func TestLastAttemptLostFailsWithRunnerLost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	tk := e.submit(t, "x")
	for attempt := 1; attempt <= 3; attempt++ {
		claimed, err := e.store.Claim(ctx, task.Claim{TaskID: tk.ID, RunnerID: "dead"})
		if err != nil {
			t.Fatalf("claim attempt %d: %v", attempt, err)
		}
		if _, err := e.bus.PublishEventSync(ctx, task.StatusEvent(claimed)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(16 * time.Second)
		e.loop.Tick(ctx)
	}
	got, _ := e.store.Load(ctx, tk.ID)
	if got.Status != task.StatusFailed || got.Error == nil || *got.Error != task.ErrRunnerLost {
		t.Fatalf("stored %s %v, want failed runner_lost", got.Status, got.Error)
	}
	events := e.log(t, tk.ID)
	for i, ev := range events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("log not contiguous: %+v", events)
		}
	}
	if last := events[len(events)-1]; last.Status != task.StatusFailed || last.Seq != got.Seq {
		t.Fatalf("last event %+v", last)
	}
}

func TestUndispatchedIsDispatchedAgain(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tk := e.submit(t, "x") // created, its dispatch lost
	e.clock.Advance(6 * time.Second)
	e.loop.Tick(context.Background())
	if d := e.nextDispatch(t); d.TaskID != tk.ID || d.Attempt != 1 {
		t.Fatalf("dispatch %+v", d)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.loop.Run(ctx) }()
	cancel()
	if err := eventually.Receive(t, done, "Run to stop"); err != nil {
		t.Fatal(err)
	}
}
