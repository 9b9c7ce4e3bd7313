package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/tether-dev/tether/internal/task"
)

// SaveSnapshot appends a batch of the running attempt's events to the stored
// task. It is the hot path of a runner, so it is one conditional UPDATE; only
// when it changes nothing is the row read, to say why.
func (s *Store) SaveSnapshot(ctx context.Context, sn task.Snapshot) (err error) {
	defer classify(&err)
	id, err := checkSnapshot(sn)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE tasks SET output = output || $4, seq = $5, progress = greatest(progress, $6),
			stream_pos = $7, updated_at = $8
		WHERE id = $1 AND status = 'running' AND attempt = $2 AND seq = $3`,
		id, sn.Attempt, sn.FromSeq, sn.Append, sn.Seq, sn.Progress, int64(sn.StreamPos), s.now())
	if err == nil && tag.RowsAffected() == 0 {
		err = s.whyNotRunning(ctx, id, sn.Attempt, sn.FromSeq)
	}
	if err != nil {
		return fmt.Errorf("save snapshot of task %s attempt %d seq %d..%d: %w",
			id, sn.Attempt, sn.FromSeq, sn.Seq, err)
	}
	return nil
}

// checkSnapshot checks a batch before it is written and returns the
// normalised task id.
func checkSnapshot(sn task.Snapshot) (string, error) {
	id, err := parseID("task id", sn.TaskID)
	if err != nil {
		return "", err
	}
	switch {
	case sn.Attempt < 1:
		return "", task.Errorf(task.CodeInvalid, "attempt must be at least 1")
	case sn.FromSeq < 0 || sn.Seq < sn.FromSeq:
		return "", task.Errorf(task.CodeInvalid, "snapshot seq %d..%d goes backwards", sn.FromSeq, sn.Seq)
	case sn.Progress < 0 || sn.Progress > 100:
		return "", task.Errorf(task.CodeInvalid, "progress %d is not 0..100", sn.Progress)
	case sn.StreamPos > math.MaxInt64:
		return "", task.Errorf(task.CodeInvalid, "stream position %d is too large", sn.StreamPos)
	case !isText(sn.Append):
		// Postgres text holds neither invalid UTF-8 nor NUL; the runner
		// must clean engine output before it is published.
		return "", task.Errorf(task.CodeInvalid, "output must be UTF-8 text without NUL")
	}
	return id, nil
}
