package runner

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// bounds lists each message of msgs as first-last seqs.
func bounds(msgs [][]task.Event) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, fmt.Sprintf("%d-%d", m[0].Seq, m[len(m)-1].Seq))
	}
	return out
}

// queueAll queues events of the given types (d: a delta of text, p:
// progress, s: status) as seq 1, 2, ...
func queueAll(a *attempt, kinds string, text string) {
	for _, k := range kinds {
		e := task.Event{TaskID: "t", Attempt: 1, Seq: a.seq + 1}
		switch k {
		case 'd':
			e.Type, e.Text = task.EventDelta, text
		case 'p':
			e.Type, e.Progress = task.EventProgress, int(e.Seq)
		case 's':
			e.Type, e.Status = task.EventStatus, task.StatusRunning
		}
		a.queueLocked(e)
		a.seq = e.Seq
	}
}

// Events that wait for their message (queued while NATS was away) are
// packed by the same bounds: consecutive deltas up to maxPackEvents share a
// message, progress and status events have their own, and the order is
// kept. The bounds stay in the outbox, so publishing again later (after an
// ack is lost) forms the very same messages, whose ids the log knows.
func TestOpenEventsArePackedByTheBounds(t *testing.T) {
	a := &attempt{r: &Runner{cfg: Config{PackWindow: time.Millisecond}}}
	a.room = sync.NewCond(&a.mu)
	queueAll(a, "s"+strings.Repeat("d", 70)+"p"+"dd"+"s", "x")
	msgs := a.closeOpenLocked()
	want := []string{"1-1", "2-65", "66-71", "72-72", "73-74", "75-75"}
	if got := bounds(msgs); !slices.Equal(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	if got := bounds(messagesOf(a.unacked)); !slices.Equal(got, want) {
		t.Fatalf("formed again: %v, want %v", got, want)
	}
	if a.open != 0 {
		t.Fatalf("%d events still open", a.open)
	}
	// Acked up to a message's end: the rest keeps its bounds, and events
	// queued later form messages of their own after them.
	a.ackedLocked(65, 0)
	queueAll(a, "ddd", "x")
	if got := bounds(messagesOf(a.unacked)); !slices.Equal(got, want[2:]) {
		t.Fatalf("after the ack, complete messages %v, want %v (open ones are left out)", got, want[2:])
	}
	a.closeOpenLocked()
	want = append(want[2:], "76-78")
	if got := bounds(messagesOf(a.unacked)); !slices.Equal(got, want) {
		t.Fatalf("after the ack %v, want %v", got, want)
	}
}

// A pack also ends at maxPackBytes of text; with packing off every event
// is a message of its own, as before packs.
func TestPackBytesAndPackingOff(t *testing.T) {
	a := &attempt{r: &Runner{cfg: Config{PackWindow: time.Millisecond}}}
	queueAll(a, "dddddd", strings.Repeat("y", maxPackBytes/2))
	if got, want := bounds(a.closeOpenLocked()), []string{"1-2", "3-4", "5-6"}; !slices.Equal(got, want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	queueAll(a, "dd", "z")
	queueAll(a, "d", strings.Repeat("y", maxPackBytes))
	queueAll(a, "d", "z")
	if got, want := bounds(a.closeOpenLocked()), []string{"7-8", "9-9", "10-10"}; !slices.Equal(got, want) {
		t.Fatalf("a delta as long as the bound: messages %v, want %v", got, want)
	}
	off := &attempt{r: &Runner{cfg: Config{PackWindow: -1}}}
	queueAll(off, "ddpd", "x")
	if got, want := bounds(off.closeOpenLocked()), []string{"1-1", "2-2", "3-3", "4-4"}; !slices.Equal(got, want) {
		t.Fatalf("packing off: %v, want %v", got, want)
	}
}
