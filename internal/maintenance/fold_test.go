package maintenance

import (
	"context"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

type logBus struct {
	Bus
	msgs []task.Msg
}

func (b logBus) ReadLog(_ context.Context, _ string, after task.Position, _ uint64) ([]task.Msg, error) {
	var out []task.Msg
	for _, m := range b.msgs {
		if after.Before(task.Position{Attempt: m.Event.Attempt, Seq: m.Event.Seq}) {
			out = append(out, m)
		}
	}
	return out, nil
}

func TestFoldAppliesTheLogAfterTheSnapshot(t *testing.T) {
	t.Parallel()
	ev := func(seq int64, typ task.EventType, text string, pos uint64) task.Msg {
		e := task.Event{Type: typ, Seq: seq, Attempt: 1, Text: text, TaskID: "t"}
		if typ == task.EventProgress {
			e.Progress = int(seq) * 10
		}
		if typ == task.EventStatus {
			e.Status = task.StatusRunning
		}
		return task.Msg{Event: e, StreamPos: pos}
	}
	bus := logBus{msgs: []task.Msg{
		ev(1, task.EventStatus, "", 10),
		ev(2, task.EventDelta, "a", 11),
		ev(3, task.EventDelta, "b", 12),
		ev(4, task.EventProgress, "", 13),
		// seq 5 lost
		ev(6, task.EventDelta, "d", 15),
	}}
	l := &Loop{Bus: bus}
	stored := task.Task{ID: "t", Status: task.StatusRunning, Attempt: 1, Seq: 2, Output: "a", StreamPos: 11}
	got, err := l.fold(context.Background(), stored)
	if err != nil {
		t.Fatal(err)
	}
	// The kept prefix ends at the hole; the seq moves past everything logged.
	if got.Seq != 6 || got.Output != "ab" || got.Progress != 40 || got.StreamPos != 13 ||
		got.Status != task.StatusRunning || got.Attempt != 1 {
		t.Fatalf("folded %+v", got)
	}
}

func TestFoldIgnoresAFencedRunnersEvents(t *testing.T) {
	t.Parallel()
	ev := func(attempt int, seq int64, text string) task.Msg {
		return task.Msg{Event: task.Event{Type: task.EventDelta, TaskID: "t", Attempt: attempt, Seq: seq, Text: text}}
	}
	// Attempt 1's runner was paused past its lease; attempt 2 continued
	// after seq 3 and is now lost too. Attempt 1's late events (seq 4..6)
	// landed in the log between attempt 2's.
	bus := logBus{msgs: []task.Msg{
		ev(1, 2, "a"), ev(1, 3, "b"),
		{Event: task.Event{Type: task.EventStatus, TaskID: "t", Attempt: 2, Seq: 4, Status: task.StatusPending, Keep: 2}},
		ev(1, 4, "X"),
		{Event: task.Event{Type: task.EventStatus, TaskID: "t", Attempt: 2, Seq: 5, Status: task.StatusRunning, Keep: 2}},
		ev(1, 5, "Y"), ev(2, 6, "c"), ev(1, 6, "Z"), ev(2, 7, "d"),
	}}
	l := &Loop{Bus: bus}
	stored := task.Task{ID: "t", Status: task.StatusRunning, Attempt: 2, Seq: 5, Output: "ab", Keep: 2}
	got, err := l.fold(context.Background(), stored)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 7 || got.Output != "abcd" || got.Attempt != 2 {
		t.Fatalf("folded %+v", got)
	}
}
