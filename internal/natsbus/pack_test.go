package natsbus_test

import (
	"bytes"
	"slices"
	"sync"
	"testing"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// deltas is a pack of taskA's deltas first..last (attempt 1).
func deltas(first, last int64) []task.Event {
	var events []task.Event
	for seq := first; seq <= last; seq++ {
		events = append(events, delta(taskA, seq))
	}
	return events
}

// publishMixed logs taskA as a runner with packs writes it, in 4
// messages: the running event 1 alone, a pack 2..5, delta 6 alone (as a
// runner from before packs writes every one), a pack 7..9.
func publishMixed(t *testing.T, p interface {
	Publish(...task.Event) error
}) {
	t.Helper()
	running := task.Event{Type: task.EventStatus, TaskID: taskA, Seq: 1, Status: task.StatusRunning, Attempt: 1}
	for _, msg := range [][]task.Event{{running}, deltas(2, 5), deltas(6, 6), deltas(7, 9)} {
		if err := p.Publish(msg...); err != nil {
			t.Fatal(err)
		}
	}
}

// streamPosOf is where publishMixed stores seq.
func streamPosOf(seq int64) uint64 {
	switch {
	case seq == 1:
		return 1
	case seq <= 5:
		return 2
	case seq == 6:
		return 3
	}
	return 4
}

// Every log reader gets a pack as its deltas, one event each with the
// bytes a client gets for it and the pack's stream position; a read that
// starts inside a pack (a snapshot at a seq in its middle) gets exactly
// the deltas after it; the last event of a log that ends in a pack is the
// pack's last delta.
func TestReadLogOfPacks(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	p := b.NewPublisher()
	publishMixed(t, p)
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		after int64
		from  uint64
	}{
		{"all", 0, 0},
		{"after the running event", 1, 1},
		{"after the first delta of a pack", 2, 2},
		{"after the middle of a pack", 3, 2},
		{"after the last delta of a pack", 5, 2},
		{"after the single delta", 6, 3},
		{"inside the last pack", 8, 4},
		{"after the end", 9, 4},
	} {
		got, err := b.ReadLog(ctx, taskA, task.Position{Attempt: 1, Seq: tt.after}, tt.from)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if tt.after == 9 {
			if len(got) != 0 {
				t.Fatalf("%s: got seqs %v", tt.name, seqs(got))
			}
			continue
		}
		checkSeqs(t, got, tt.after+1, 9)
		for _, m := range got {
			if m.StreamPos != streamPosOf(m.Event.Seq) {
				t.Errorf("%s: seq %d at stream position %d, want %d", tt.name, m.Event.Seq, m.StreamPos, streamPosOf(m.Event.Seq))
			}
			if m.Event.Seq > 1 && !bytes.Equal(m.Data, protocol.EncodeEvent(delta(taskA, m.Event.Seq))) {
				t.Errorf("%s: seq %d is %s", tt.name, m.Event.Seq, m.Data)
			}
		}
	}
	last, ok, err := b.LastEvent(ctx, taskA)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if last.Event.Seq != 9 || last.StreamPos != 4 || last.Event.Text != delta(taskA, 9).Text ||
		!bytes.Equal(last.Data, protocol.EncodeEvent(delta(taskA, 9))) {
		t.Fatalf("LastEvent = %+v", last)
	}
}

// A pack published again the same way (a runner's republish after a lost
// ack or an outage), or echoed, is a repeat to the log: its message id
// names the task, the attempt and the range.
func TestPackPublishedAgainIsStoredOnce(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	p := b.NewPublisher()
	publishMixed(t, p)
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	again := b.NewPublisher()
	publishMixed(t, again)
	if err := again.Echo(deltas(7, 9)...); err != nil {
		t.Fatal(err)
	}
	if err := again.Publish(deltas(10, 11)...); err != nil {
		t.Fatal(err)
	}
	pos, err := again.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pos != 5 {
		t.Fatalf("the new pack is at stream position %d, want 5: repeats were stored", pos)
	}
	got, err := b.ReadLog(ctx, taskA, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, got, 1, 11)
}

// A live follower gets a pack as its deltas, in order, each with its own
// bytes.
func TestSubscribeTaskSplitsPacks(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	var (
		mu  sync.Mutex
		got []task.Msg
	)
	unsub, err := b.SubscribeTask(taskA, func(m task.Msg) {
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unsub() }()
	p := b.NewPublisher()
	publishMixed(t, p)
	if _, err := p.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the live events of 4 messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 9
	})
	mu.Lock()
	defer mu.Unlock()
	checkSeqs(t, got, 1, 9)
	for _, m := range got[1:] {
		if m.Event.TaskID != taskA || m.Event.Type != task.EventDelta ||
			!bytes.Equal(m.Data, protocol.EncodeEvent(delta(taskA, m.Event.Seq))) {
			t.Errorf("live seq %d: %+v %s", m.Event.Seq, m.Event, m.Data)
		}
	}
	if !slices.IsSortedFunc(got, func(a, b task.Msg) int { return int(a.Event.Seq - b.Event.Seq) }) {
		t.Errorf("live order %v", seqs(got))
	}
}
