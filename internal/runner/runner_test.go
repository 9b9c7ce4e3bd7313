package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/engine/enginetest"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
)

func TestStreamEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startRunner(runner.Config{ID: "r1"}, nil)
	tk := e.submit("/stream 50 0")

	done := e.waitStatus(tk.ID, task.StatusDone)
	events := e.log(tk.ID)
	e.checkLog(events, done)

	var want strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&want, "t%d ", i)
	}
	// running, 50 deltas, 50 progress changes (2, 4, ... 100), done.
	if len(events) != 102 {
		t.Fatalf("log holds %d events, want 102", len(events))
	}
	if first := events[0]; first.Type != task.EventStatus || first.Status != task.StatusRunning || first.Attempt != 1 {
		t.Fatalf("first event %+v, want running attempt 1", first)
	}
	last := events[len(events)-1]
	if last.Type != task.EventStatus || last.Status != task.StatusDone || last.Error != nil {
		t.Fatalf("last event %+v, want done", last)
	}
	if done.Output != want.String() || done.Seq != last.Seq || done.Progress != 100 {
		t.Fatalf("stored output %q seq %d progress %d; want %q seq %d progress 100",
			done.Output, done.Seq, done.Progress, want.String(), last.Seq)
	}
	if outputOf(events) != want.String() {
		t.Fatalf("log output %q", outputOf(events))
	}
	msgs, _, err := e.store.History(context.Background(), user, tk.ConversationID, task.Page{})
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	if len(msgs) != 2 || msgs[1].Content != want.String() || msgs[1].Status == nil || *msgs[1].Status != "done" {
		t.Fatalf("history %+v: want the assistant message filled and done", msgs)
	}
}

func TestFail(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startRunner(runner.Config{ID: "r1"}, nil)
	tk := e.submit("/fail 5 0")

	failed := e.waitStatus(tk.ID, task.StatusFailed)
	events := e.log(tk.ID)
	e.checkLog(events, failed)
	if failed.Error == nil || *failed.Error != "demo failure" || failed.Output != "t1 t2 t3 t4 t5 " {
		t.Fatalf("stored %+v", failed)
	}
	last := events[len(events)-1]
	if last.Status != task.StatusFailed || last.Error == nil || *last.Error != "demo failure" || last.Seq != failed.Seq {
		t.Fatalf("last event %+v", last)
	}
}

func TestCancelWhileRunning(t *testing.T) {
	t.Parallel()
	e := setup(t)
	stop := e.startRunner(runner.Config{ID: "r1"}, nil)
	tk := e.submit("/stream 2000 20")

	eventually.True(t, "the first deltas", func() bool { return len(e.log(tk.ID)) >= 4 })
	res, err := e.store.Cancel(context.Background(), user, tk.ID)
	if err != nil || !res.Requested {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	if err := e.bus.RequestCancel(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	cancelled := e.waitStatus(tk.ID, task.StatusCancelled)
	stop() // after Run returns nothing of this runner is in flight
	events := e.log(tk.ID)
	e.checkLog(events, cancelled)
	last := events[len(events)-1]
	if last.Status != task.StatusCancelled || last.Seq != cancelled.Seq {
		t.Fatalf("last event %+v, stored seq %d", last, cancelled.Seq)
	}
	if n := strings.Count(cancelled.Output, " "); n >= 2000 {
		t.Fatalf("cancelled after %d deltas: the engine did not stop", n)
	}
}

// A cancel whose NATS message was lost still arrives with a heartbeat.
func TestCancelByHeartbeat(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startRunner(runner.Config{ID: "r1"}, nil)
	tk := e.submit("/stream 2000 20")

	eventually.True(t, "the first deltas", func() bool { return len(e.log(tk.ID)) >= 4 })
	if res, err := e.store.Cancel(context.Background(), user, tk.ID); err != nil || !res.Requested {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	cancelled := e.waitStatus(tk.ID, task.StatusCancelled)
	events := e.log(tk.ID)
	e.checkLog(events, cancelled)
	if last := events[len(events)-1]; last.Status != task.StatusCancelled {
		t.Fatalf("last event %+v", last)
	}
}

func TestCompetingRunnersRunEachAttemptOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startRunner(runner.Config{ID: "r1", Concurrency: 4}, nil)
	e.startRunner(runner.Config{ID: "r2", Concurrency: 4}, nil)

	var tasks []task.Task
	for range 16 {
		tk := e.submit("/stream 5 0")
		// A second dispatch of the same task (another message id, so
		// JetStream keeps both): only one runner may run it.
		if err := e.bus.Dispatch(context.Background(), tk.ID, tk.Attempt+1); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, tk)
	}
	for _, tk := range tasks {
		done := e.waitStatus(tk.ID, task.StatusDone)
		events := e.log(tk.ID)
		e.checkLog(events, done)
		running := 0
		for _, ev := range events {
			if ev.Type == task.EventStatus && ev.Status == task.StatusRunning {
				running++
			}
		}
		if running != 1 || done.Attempt != 1 || done.Output != "t1 t2 t3 t4 t5 " {
			t.Fatalf("task %s: %d running events, attempt %d, output %q", tk.ID, running, done.Attempt, done.Output)
		}
	}
}

// A runner that lost its lease (maintenance handed the task to a new
// attempt) publishes nothing more; the new attempt numbers after the log
// and continues the answer from what the lost one logged.
func TestLeaseLostRunnerPublishesNothingMore(t *testing.T) {
	t.Parallel()
	e := setup(t)
	eng := newStepEngine()
	e.startRunner(runner.Config{ID: "r1", Engine: eng, Concurrency: 2}, nil)
	tk := e.submit("step")

	eventually.Receive(t, eng.started, "attempt 1 to start")
	eng.steps <- "first "
	eventually.True(t, "the first delta in the log", func() bool { return len(e.log(tk.ID)) == 2 })

	// The store's clock jumps past the lease: the runner's heartbeats are
	// late by the store's reckoning, and maintenance takes the task.
	e.clock.Advance(time.Hour)
	loop := &maintenance.Loop{Store: e.store, Bus: e.bus}
	loop.Tick(context.Background())

	// The stale attempt is fenced at its next heartbeat and stops; its
	// last try to write is refused.
	if err := eventually.Receive(t, eng.ended, "attempt 1 to stop"); err == nil {
		t.Fatal("attempt 1 ended without error")
	}
	if err := eventually.Receive(t, eng.afterStop, "attempt 1's late write"); err == nil {
		t.Fatal("a fenced attempt's delta was accepted")
	}
	// Maintenance dispatched attempt 2; the same runner takes it.
	eventually.Receive(t, eng.started, "attempt 2 to start")
	eng.steps <- "second "
	eng.steps <- ""
	done := e.waitStatus(tk.ID, task.StatusDone)

	events := e.log(tk.ID)
	e.checkLog(events, done)
	want := []string{"status running 1", "delta first ", "status pending 2", "status running 2", "delta second ", "status done 2"}
	var got []string
	for _, ev := range events {
		if ev.Type == task.EventStatus {
			got = append(got, fmt.Sprintf("status %s %d", ev.Status, ev.Attempt))
		} else {
			got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Text))
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if done.Attempt != 2 || done.Output != "first second " {
		t.Fatalf("stored attempt %d output %q", done.Attempt, done.Output)
	}
	for _, ev := range events {
		if ev.Type == task.EventStatus && ev.Attempt == 2 && ev.Status.Active() && ev.Keep != len("first ") {
			t.Fatalf("attempt 2's %s event keeps %d bytes, want %d", ev.Status, ev.Keep, len("first "))
		}
	}
}

// Snapshots are written per batch, not per event, each continuing the last
// and each with the exact stream position of its last event.
func TestSnapshotBatches(t *testing.T) {
	t.Parallel()
	e := setup(t)
	counting := &countingStore{Store: e.store}
	e.startRunner(runner.Config{ID: "r1", SnapshotInterval: time.Hour, SnapshotEvents: 256}, counting)
	// 2 ms apart, so the snapshotter gets to write before the engine ends
	// (with /stream N 0 the whole answer may be out before its first cut).
	tk := e.submit("/stream 600 2")

	done := e.waitStatus(tk.ID, task.StatusDone)
	events := e.log(tk.ID)
	e.checkLog(events, done)
	msgs, err := e.bus.ReadLog(context.Background(), tk.ID, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	seqAt := map[uint64]int64{}
	for _, m := range msgs {
		seqAt[m.StreamPos] = m.Event.Seq
	}
	// 700 events after the running status (seq 1): the timer is out of the
	// way, so every snapshot holds at least 256 of them; Finish writes the
	// rest.
	counting.mu.Lock()
	defer counting.mu.Unlock()
	if n := len(counting.saved); n < 1 || n > 2 {
		t.Fatalf("%d snapshots for 700 events in batches of at least 256", n)
	}
	from := int64(1)
	for _, sn := range counting.saved {
		if sn.FromSeq != from || sn.Seq-sn.FromSeq < 256 {
			t.Fatalf("snapshot %d..%d does not continue from %d with a full batch", sn.FromSeq, sn.Seq, from)
		}
		if got := seqAt[sn.StreamPos]; got != sn.Seq {
			t.Fatalf("snapshot at seq %d has the stream position of seq %d", sn.Seq, got)
		}
		from = sn.Seq
	}
	if got := seqAt[done.StreamPos]; got != done.Seq-1 {
		t.Fatalf("finished at seq %d with the stream position of seq %d, want the last event before it", done.Seq, got)
	}
}

// On shutdown an attempt that ends within the drain timeout finishes; one
// that does not is abandoned without a write.
func TestDrainThenAbandon(t *testing.T) {
	t.Parallel()
	e := setup(t)
	eng := newStepEngine()
	stop := e.startRunner(runner.Config{ID: "r1", Engine: eng, DrainTimeout: 300 * time.Millisecond}, nil)
	tk := e.submit("step")
	eventually.Receive(t, eng.started, "the attempt to start")
	eng.steps <- "a "
	eventually.True(t, "the delta in the log", func() bool { return len(e.log(tk.ID)) == 2 })

	stop() // returns once the drain timeout abandoned the attempt
	if err := eventually.Receive(t, eng.ended, "the engine to stop"); err == nil {
		t.Fatal("abandoned engine returned nil")
	}
	if err := eventually.Receive(t, eng.afterStop, "the late write"); err == nil {
		t.Fatal("an abandoned attempt's delta was accepted")
	}
	stored, err := e.store.Load(context.Background(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != task.StatusRunning {
		t.Fatalf("abandoned task is %s, want still running (its lease will expire)", stored.Status)
	}
	if events := e.log(tk.ID); len(events) != 2 {
		t.Fatalf("log holds %d events after abandon, want 2", len(events))
	}
}

func TestDrainLetsShortAttemptsFinish(t *testing.T) {
	t.Parallel()
	e := setup(t)
	eng := newStepEngine()
	stop := e.startRunner(runner.Config{ID: "r1", Engine: eng, DrainTimeout: time.Minute}, nil)
	tk := e.submit("step")
	eventually.Receive(t, eng.started, "the attempt to start")

	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	eng.steps <- "a "
	eng.steps <- ""
	<-stopped
	done := e.waitStatus(tk.ID, task.StatusDone)
	e.checkLog(e.log(tk.ID), done)
}

// A fast answer's deltas share log messages (packs) while every reader
// still gets one event per seq, contiguous, folding to the stored answer.
// The pack window is longer than the test, so what shares a message does
// not depend on the machine's speed: a pack ends at its bounds, at a
// progress or status event, or at a cut.
func TestFastAnswerIsPacked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startRunner(runner.Config{ID: "r1", PackWindow: time.Hour}, nil)
	tk := e.submit("/stream 3000 0")

	done := e.waitStatus(tk.ID, task.StatusDone)
	events := e.log(tk.ID)
	e.checkLog(events, done)
	if done.Output != enginetest.StreamText(3000) || outputOf(events) != done.Output {
		t.Fatalf("stored output %d bytes, log output %d bytes, want %d", len(done.Output),
			len(outputOf(events)), len(enginetest.StreamText(3000)))
	}
	last, ok, err := e.bus.LastEvent(context.Background(), tk.ID)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	// The task is alone in this test's stream: its last message's stream
	// position is how many messages the log holds.
	messages := int(last.StreamPos)
	t.Logf("%d events in %d log messages", len(events), messages)
	if messages*4 > len(events) {
		t.Fatalf("%d events in %d log messages: the deltas were not packed", len(events), messages)
	}
}

// pacedEngine writes n deltas, one every gap: a model streaming at a human
// pace.
type pacedEngine struct {
	n   int
	gap time.Duration
}

func (p pacedEngine) Run(ctx context.Context, _ runnerInput, out runnerOutput) error {
	for i := 1; i <= p.n; i++ {
		if err := out.Delta(fmt.Sprintf("t%d ", i)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(p.gap):
		}
	}
	return nil
}

// A slow stream (30 tokens a second, far beyond the pack window) packs
// nothing: every delta is a log message of its own, sent as it comes (the
// first, which follows the running event at once, after at most the
// window). Each later delta comes a whole gap after the previous one was
// sent, so this does not depend on the machine's speed.
func TestSlowAnswerIsNotPacked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.startRunner(runner.Config{ID: "r1", Engine: pacedEngine{n: 10, gap: time.Second / 30}}, nil)
	tk := e.submit("slow")

	done := e.waitStatus(tk.ID, task.StatusDone)
	events := e.log(tk.ID)
	e.checkLog(events, done)
	last, ok, err := e.bus.LastEvent(context.Background(), tk.ID)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	// running, 10 deltas, done: 12 events, alone in this test's stream.
	if len(events) != 12 || last.StreamPos != 12 {
		t.Fatalf("%d events in %d log messages, want 12 in 12", len(events), last.StreamPos)
	}
}
