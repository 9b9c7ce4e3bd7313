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
// its last snapshot. The folded output is what the next attempt keeps and
// continues (PROTOCOL.md section 3: everything the lost attempt published and
// the log acknowledged), and the status event that ends or replaces the
// attempt is numbered after every logged event, so no seq is used twice.
//
// Only the attempt's own events count; a runner fenced out earlier may have
// logged events of an older attempt, and those are stale. Status events in
// the log are the attempt's own running event (already in the snapshot), so
// they only advance the seq. A gap in the log (an event lost in an
// asynchronous publish) ends the kept prefix: the text after it is not
// applied, because a prefix with a hole in it is not what any tab showed;
// the seq still moves past every logged event.
func (l *Loop) fold(ctx context.Context, t task.Task) (task.Task, error) {
	msgs, err := l.Bus.ReadLog(ctx, t.ID, task.PositionOf(t), t.StreamPos)
	if err != nil {
		return t, fmt.Errorf("read log of task %s after seq %d: %w", t.ID, t.Seq, err)
	}
	lastSeq, holed := t.Seq, false
	for _, m := range msgs {
		e := m.Event
		if e.Attempt != t.Attempt {
			continue
		}
		lastSeq = max(lastSeq, e.Seq)
		if holed {
			continue
		}
		if e.Seq != t.Seq+1 {
			cmp.Or(l.Logger, slog.Default()).Error("gap in task log: the new attempt keeps the text before it",
				"task", t.ID, "attempt", t.Attempt, "seq", t.Seq, "next_seq", e.Seq)
			holed = true
			continue
		}
		if e.Type == task.EventStatus {
			t.Seq = e.Seq
		} else {
			t.Apply(e)
		}
		t.StreamPos = max(t.StreamPos, m.StreamPos)
	}
	t.Seq = lastSeq
	return t, nil
}
