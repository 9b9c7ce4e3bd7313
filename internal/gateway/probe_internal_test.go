package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/task"
)

// heldLogBus answers ReadLog only when the test lets it: a stream electing a
// leader after a NATS node died. Each read takes one answer from answers.
type heldLogBus struct {
	Bus
	reads   chan task.Position // receives the position of every read
	answers chan logAnswer
}

type logAnswer struct {
	msgs []task.Msg
	err  error
}

func (b *heldLogBus) ReadLog(ctx context.Context, _ string, after task.Position, _ uint64) ([]task.Msg, error) {
	b.reads <- after
	select {
	case a := <-b.answers:
		return a.msgs, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// recordingSink keeps the seqs it is sent.
type recordingSink struct {
	mu  sync.Mutex
	got []int64
}

func (k *recordingSink) sendSnapshot(task.Task, []byte) bool { return true }
func (k *recordingSink) waitRoom(context.Context)            {}
func (k *recordingSink) sendEvent(m task.Msg) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, m.Event.Seq)
	return true
}

func (k *recordingSink) seqs() []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.got)
}

func newProbeFollower(t *testing.T) (*follower, *heldLogBus, *recordingSink) {
	t.Helper()
	bus := &heldLogBus{reads: make(chan task.Position, 8), answers: make(chan logAnswer)}
	h := &hub{bus: bus, metrics: newMetrics(), maxBuffer: 1 << 20, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	k := &recordingSink{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := newFollower(ctx, h, "t", k, nil)
	f.topic = &topic{}
	f.last = task.Position{Attempt: 1, Seq: 2}
	f.filling = false
	return f, bus, k
}

// After NATS comes back a follower looks in the log for events the live
// feed missed. While that read waits (seconds, when the stream has no
// leader yet), live events that continue what the tab has are delivered at
// once; the first one that leaves a gap is held, and the read's events fill
// the gap before it. Every event arrives once, in order.
func TestProbeLetsLiveEventsPassWhileTheLogIsSlow(t *testing.T) {
	f, bus, k := newProbeFollower(t)
	f.probe()
	if at := <-bus.reads; at != (task.Position{Attempt: 1, Seq: 2}) {
		t.Fatalf("read after %v", at)
	}
	f.onLive(delta(3))
	f.onLive(delta(4))
	if got := k.seqs(); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("during the read, delivered %v; want [3 4] at once", got)
	}
	f.onLive(delta(7)) // 5 and 6 never came live: held
	f.onLive(delta(8))
	if got := k.seqs(); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("delivered %v past a gap", got)
	}
	// The read (begun after 2) returns what the log holds, 3 to 6.
	bus.answers <- logAnswer{msgs: []task.Msg{delta(3), delta(4), delta(5), delta(6)}}
	eventually.True(t, "the gap filled", func() bool { return len(k.seqs()) == 6 })
	if got := k.seqs(); !slices.Equal(got, []int64{3, 4, 5, 6, 7, 8}) {
		t.Fatalf("delivered %v", got)
	}
	eventually.True(t, "the catch-up to end", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return !f.filling })
	f.onLive(delta(9))
	if got := k.seqs(); len(got) != 7 || got[6] != 9 {
		t.Fatalf("after the catch-up, delivered %v", got)
	}
}

// A look in the log that fails (no stream leader yet) is taken again: the
// task may have ended while the connection was away, with no later live
// event to show the tab it missed the end.
func TestFailedProbeIsRetried(t *testing.T) {
	f, bus, k := newProbeFollower(t)
	f.probe()
	<-bus.reads
	bus.answers <- logAnswer{err: errors.New("unavailable: context deadline exceeded")}
	if at := <-bus.reads; at != (task.Position{Attempt: 1, Seq: 2}) {
		t.Fatalf("second read after %v", at)
	}
	bus.answers <- logAnswer{msgs: []task.Msg{delta(3)}}
	eventually.True(t, "the missed event", func() bool { return len(k.seqs()) == 1 })
	eventually.True(t, "the catch-up to end", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return !f.filling })
	if got := k.seqs(); !slices.Equal(got, []int64{3}) {
		t.Fatalf("delivered %v", got)
	}
}

// A gap is closed from the log even when reads fail for a while (a stream
// electing its leader): the follower reads again instead of counting the
// failures toward a resync, and the tab gets the missing events, not a
// snapshot.
func TestGapWaitsForTheLogThroughFailedReads(t *testing.T) {
	f, bus, k := newProbeFollower(t)
	f.onLive(delta(5)) // 3 and 4 never came live
	for range 3 {
		<-bus.reads
		bus.answers <- logAnswer{err: errors.New("unavailable: context deadline exceeded")}
	}
	if at := <-bus.reads; at != (task.Position{Attempt: 1, Seq: 2}) {
		t.Fatalf("read after %v", at)
	}
	bus.answers <- logAnswer{msgs: []task.Msg{delta(3), delta(4)}}
	eventually.True(t, "the gap filled", func() bool { return len(k.seqs()) == 3 })
	if got := k.seqs(); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("delivered %v", got)
	}
	if n := testutil.ToFloat64(f.hub.metrics.resyncs); n != 0 {
		t.Fatalf("%v resyncs", n)
	}
	if reads, failed := testutil.ToFloat64(f.hub.metrics.logReads), testutil.ToFloat64(f.hub.metrics.logReadErrs); reads != 4 || failed != 3 {
		t.Fatalf("%v log reads, %v failed; want 4, 3 failed", reads, failed)
	}
}

// A runner publishes again, after later events, what a stream without a
// leader dropped. While the follower waits on the log for that gap, the
// live copy closes it: the tab gets the missing event and the held ones at
// once, in order, without waiting for the read; the read's answer then
// adds nothing twice.
func TestLateLiveCopyClosesAGapBeforeTheLog(t *testing.T) {
	f, bus, k := newProbeFollower(t)
	f.onLive(delta(4)) // 3 was dropped by the leaderless stream
	f.onLive(delta(5))
	if at := <-bus.reads; at != (task.Position{Attempt: 1, Seq: 2}) {
		t.Fatalf("read after %v", at)
	}
	if got := k.seqs(); len(got) != 0 {
		t.Fatalf("delivered %v past a gap", got)
	}
	f.onLive(delta(3)) // published again
	f.onLive(delta(4)) // and its repeat
	f.onLive(delta(6))
	if got := k.seqs(); !slices.Equal(got, []int64{3, 4, 5, 6}) {
		t.Fatalf("while the read waits, delivered %v; want [3 4 5 6]", got)
	}
	bus.answers <- logAnswer{msgs: []task.Msg{delta(3), delta(4)}}
	eventually.True(t, "the catch-up to end", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return !f.filling })
	f.onLive(delta(7))
	if got := k.seqs(); !slices.Equal(got, []int64{3, 4, 5, 6, 7}) {
		t.Fatalf("delivered %v", got)
	}
	if n := testutil.ToFloat64(f.hub.metrics.resyncs); n != 0 {
		t.Fatalf("%v resyncs", n)
	}
}

// A late event is put back in its place in the buffer even while the
// catch-up is not waiting, and one of another attempt is not moved: the
// buffer stays in (attempt, seq) order within an attempt.
func TestBufferPutsALateEventInItsPlace(t *testing.T) {
	f, _, _ := newProbeFollower(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range []task.Msg{delta(5), delta(7), delta(4), delta(6), delta(7), attemptDelta(2, 1), delta(8)} {
		f.bufferLocked(m)
	}
	var got []task.Position
	for _, m := range f.buf {
		got = append(got, positionOf(m))
	}
	want := []task.Position{{Attempt: 1, Seq: 4}, {Attempt: 1, Seq: 5}, {Attempt: 1, Seq: 6}, {Attempt: 1, Seq: 7},
		{Attempt: 2, Seq: 1}, {Attempt: 1, Seq: 8}}
	if !slices.Equal(got, want) {
		t.Fatalf("buffer %v, want %v", got, want)
	}
}

func attemptDelta(attempt int, seq int64) task.Msg {
	m := delta(seq)
	m.Event.Attempt = attempt
	return m
}

// lateStoredBus is a log in which events 3 and 4 were stored at stream
// positions 1005 and 1006, below the position 1010 the follower holds: a
// publish retried after the stream lost its leader is stored after the
// events that followed it.
type lateStoredBus struct {
	Bus
	mu    sync.Mutex
	froms []uint64
}

func (b *lateStoredBus) ReadLog(_ context.Context, _ string, after task.Position, from uint64) ([]task.Msg, error) {
	b.mu.Lock()
	b.froms = append(b.froms, from)
	b.mu.Unlock()
	var out []task.Msg
	for i, seq := range []int64{3, 4} {
		m := delta(seq)
		m.StreamPos = 1005 + uint64(i)
		if m.StreamPos >= from && after.Before(positionOf(m)) {
			out = append(out, m)
		}
	}
	return out, nil
}

func (b *lateStoredBus) readFroms() []uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.froms)
}

// A gap the log cannot close from the follower's stream position is looked
// for in the task's whole log before the follower waits or resyncs: the
// tab gets the events, not a snapshot.
func TestGapIsLookedForInTheWholeLog(t *testing.T) {
	f, _, k := newProbeFollower(t)
	bus := &lateStoredBus{}
	f.hub.bus = bus
	f.pos = 1010
	f.onLive(delta(5))
	eventually.True(t, "the gap filled", func() bool { return len(k.seqs()) == 3 })
	if got := k.seqs(); !slices.Equal(got, []int64{3, 4, 5}) {
		t.Fatalf("delivered %v", got)
	}
	if froms := bus.readFroms(); len(froms) != 2 || froms[0] != 1010 || froms[1] != 0 {
		t.Fatalf("read the log from %v; want [1010 0]", froms)
	}
	if n := testutil.ToFloat64(f.hub.metrics.resyncs); n != 0 {
		t.Fatalf("%v resyncs", n)
	}
}
