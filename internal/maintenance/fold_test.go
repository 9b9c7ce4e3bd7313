package maintenance

import (
	"context"
	"testing"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/task"
)

type logBus struct {
	Bus
	msgs []natsbus.Msg
}

func (b logBus) ReadLog(_ context.Context, _ string, afterSeq int64, _ uint64) ([]natsbus.Msg, error) {
	var out []natsbus.Msg
	for _, m := range b.msgs {
		if m.Event.Seq > afterSeq {
			out = append(out, m)
		}
	}
	return out, nil
}

func TestFoldAppliesTheLogAfterTheSnapshot(t *testing.T) {
	t.Parallel()
	ev := func(seq int64, typ task.EventType, text string, pos uint64) natsbus.Msg {
		e := task.Event{Type: typ, Seq: seq, Text: text, TaskID: "t"}
		if typ == task.EventProgress {
			e.Progress = int(seq) * 10
		}
		if typ == task.EventStatus {
			e.Status, e.Attempt = task.StatusRunning, 1
		}
		return natsbus.Msg{Event: e, StreamPos: pos}
	}
	bus := logBus{msgs: []natsbus.Msg{
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
	if got.Seq != 6 || got.Output != "abd" || got.Progress != 40 || got.StreamPos != 15 ||
		got.Status != task.StatusRunning || got.Attempt != 1 {
		t.Fatalf("folded %+v", got)
	}
}
