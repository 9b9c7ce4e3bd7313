package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// A fast answer logged in packs (the runner's pack window is longer than
// the test, so packs end only at their bounds, at progress events and at
// cuts) is resumed over SSE from a Last-Event-ID inside a pack, and from
// one at a pack's end: the stream goes on at exactly the next seq and
// carries every later event as the log holds it, one seq each, with no gap
// and no repeat.
func TestSSEResumeInsideAPack(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.runner.PackWindow = time.Hour })
	taskID, convID := newID(), newID()
	code, _ := e.httpDo("POST", "/v1/tasks", "kim", map[string]any{"task_id": taskID, "conversation_id": convID, "content": "/stream 3000 0"})
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/tasks: %d", code)
	}
	// Live: a snapshot, then every event after it as the log holds it
	// (logged[i] has seq i+1).
	evs, stop := e.sse(taskID, "kim", "")
	var live []sseEvent
	for ev := range evs {
		live = append(live, ev)
		if ev.data.Type == "status" && isTerminal(ev.data.Status) {
			break
		}
	}
	stop()
	logged, err := e.bus.ReadLog(context.Background(), taskID, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) < 2 || live[0].typ != "snapshot" || live[0].data.Task == nil {
		t.Fatalf("live SSE: %d events, the first %+v", len(live), live[0])
	}
	from := live[0].data.Task.Seq
	if want := logged[from:]; len(live)-1 != len(want) {
		t.Fatalf("live after the snapshot at %d: %d events, want %d", from, len(live)-1, len(want))
	}
	for i, ev := range live[1:] {
		if w := logged[int(from)+i].Event; ev.data.Seq != w.Seq || ev.data.Type != string(w.Type) || ev.data.Text != w.Text {
			t.Fatalf("live event %d: %+v, want %+v", i, ev.data, w)
		}
	}

	// Resume points: the first few inside a pack (an event that shares
	// its stream position with the next one), and a pack's last delta.
	var inside, ends []int64
	for i := 0; i+1 < len(logged); i++ {
		m, next := logged[i], logged[i+1]
		switch {
		case m.StreamPos == next.StreamPos && len(inside) < 4:
			inside = append(inside, m.Event.Seq)
		case m.StreamPos != next.StreamPos && m.Event.Type == task.EventDelta && i > 0 &&
			logged[i-1].StreamPos == m.StreamPos && len(ends) < 2:
			ends = append(ends, m.Event.Seq)
		}
	}
	if len(inside) < 4 || len(ends) < 2 {
		t.Fatalf("the log holds too few packs: resume points inside %v, at an end %v", inside, ends)
	}
	for _, last := range append(inside, ends...) {
		evs, stop := e.sse(taskID, "kim", strconv.FormatInt(last, 10))
		var got []sseEvent
		for ev := range evs {
			got = append(got, ev)
		}
		stop()
		want := logged[last:] // logged[i] has seq i+1
		if len(got) != len(want) {
			t.Fatalf("resume after %d: %d events, want %d", last, len(got), len(want))
		}
		for i, ev := range got {
			w := want[i].Event
			if ev.typ == "snapshot" || ev.data.Seq != w.Seq || ev.id != strconv.FormatInt(w.Seq, 10) ||
				ev.data.Type != string(w.Type) || ev.data.Text != w.Text {
				t.Fatalf("resume after %d, event %d: %s %+v, want %+v", last, i, ev.typ, ev.data, w)
			}
		}
	}
}
