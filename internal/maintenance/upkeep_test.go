package maintenance_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/task"
)

// countingBus counts dispatches.
type countingBus struct {
	*natsbus.Bus
	mu         sync.Mutex
	dispatches []string
}

func (b *countingBus) Dispatch(ctx context.Context, id string, attempt int) error {
	b.mu.Lock()
	b.dispatches = append(b.dispatches, id)
	b.mu.Unlock()
	return b.Bus.Dispatch(ctx, id, attempt)
}

func (b *countingBus) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.dispatches)
}

// Two processes' maintenance, a round a second each, dispatch a task that
// waits for a runner again once after RedispatchAge and then once per
// RedispatchEvery between them, not each every round (JetStream would drop
// most of those as duplicates anyway).
func TestWaitingTaskIsDispatchedAgainOncePerPeriod(t *testing.T) {
	t.Parallel()
	e := setup(t)
	bus := &countingBus{Bus: e.bus}
	loops := []*maintenance.Loop{{Store: e.store, Bus: bus}, {Store: e.store, Bus: bus}}
	e.submit(t, "waiting") // its dispatch was lost
	ctx := context.Background()
	at := map[int]int{}
	for second := 1; second <= 50; second++ {
		e.clock.Advance(time.Second)
		for _, l := range loops {
			l.Tick(ctx)
		}
		at[second] = bus.count()
	}
	// Pending for more than 5 s at second 6, and more than 30 s after that at 37.
	if at[5] != 0 || at[6] != 1 || at[36] != 1 || at[37] != 2 || at[50] != 2 {
		t.Fatalf("dispatches by second: 5:%d 6:%d 36:%d 37:%d 50:%d", at[5], at[6], at[36], at[37], at[50])
	}
}

// A finished task's events leave the log once LogGrace has passed; a
// running task's stay.
func TestFinishedTaskLogIsPurgedAfterTheGrace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.loop.LogGrace = time.Minute
	ctx := context.Background()
	finished, running := e.submit(t, "done"), e.submit(t, "running")
	for _, tk := range []task.Task{finished, running} {
		claimed, err := e.store.Claim(ctx, task.Claim{TaskID: tk.ID, RunnerID: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.bus.PublishEventSync(ctx, task.StatusEvent(claimed)); err != nil {
			t.Fatal(err)
		}
		if tk.ID == finished.ID {
			done, err := e.store.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
				TaskID: tk.ID, Attempt: 1, FromSeq: claimed.Seq, Seq: claimed.Seq + 1}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.bus.PublishEventSync(ctx, task.StatusEvent(done)); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.loop.Tick(ctx)
	if len(e.log(t, finished.ID)) != 2 {
		t.Fatal("purged within the grace")
	}
	for range 6 { // heartbeat the running task while the clock moves
		e.clock.Advance(10 * time.Second)
		if _, err := e.store.Heartbeat(ctx, running.ID, 1); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Second)
	e.loop.Tick(ctx)
	if got := e.log(t, finished.ID); len(got) != 0 {
		t.Fatalf("finished task's log after the grace: %+v", got)
	}
	if got := e.log(t, running.ID); len(got) != 1 {
		t.Fatalf("running task's log: %+v", got)
	}
	if got, _ := e.store.Load(ctx, finished.ID); got.Status != task.StatusDone || got.Seq != 2 {
		t.Fatalf("the snapshot changed: %+v", got)
	}
}
