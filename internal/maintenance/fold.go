package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/tether-dev/tether/internal/task"
)

// fold is the task.Fold of ExpireLeases: it brings the stored snapshot of a
// task whose runner died up to date with what that runner published after
// its last snapshot, so the status event that ends or replaces the attempt
// is numbered after every logged event and no seq is used twice.
//
// Status events in the log are the attempt's own running event (already in
// the snapshot) or nothing the store does not know better, so they only
// advance the seq. A gap in the log (an event lost in an asynchronous
// publish) is logged and jumped over: reusing a logged seq would be worse
// than an output missing the lost text, which the next attempt replaces.
func (l *Loop) fold(ctx context.Context, t task.Task) (task.Task, error) {
	msgs, err := l.Bus.ReadLog(ctx, t.ID, t.Seq, t.StreamPos)
	if err != nil {
		return t, fmt.Errorf("read log of task %s after seq %d: %w", t.ID, t.Seq, err)
	}
	for _, m := range msgs {
		e := m.Event
		if e.Seq <= t.Seq {
			continue
		}
		if e.Seq != t.Seq+1 {
			cmp.Or(l.Logger, slog.Default()).Error("gap in task log: continuing after it",
				"task", t.ID, "attempt", t.Attempt, "seq", t.Seq, "next_seq", e.Seq)
		}
		if e.Type == task.EventStatus {
			t.Seq = e.Seq
		} else {
			t.Apply(e)
		}
		t.StreamPos = max(t.StreamPos, m.StreamPos)
	}
	return t, nil
}
