package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// saveSnapshot moves a running attempt's row to the batch's seq and, when
// the batch has text, appends it as a chunk: the row is never rewritten with
// the whole output, so a batch costs O(its own bytes) however long the
// answer. Both happen only if the row is at that attempt and FromSeq; the
// count says whether it was.
const saveSnapshot = `
	WITH u AS (
		UPDATE tasks SET seq = $5, progress = greatest(progress, $6), stream_pos = $7, updated_at = $8
		WHERE id = $1 AND status = 'running' AND attempt = $2 AND seq = $3
		RETURNING id),
	o AS (
		INSERT INTO task_output (task_id, attempt, seq, text)
		SELECT id, $2, $5, $4 FROM u WHERE $4 <> '')
	SELECT count(*) FROM u`

// SaveSnapshot appends a batch of the running attempt's events to the stored
// task. It is the hot path of a runner, so it is one statement; only when it
// changes nothing is the row read, to say why.
func (s *Store) SaveSnapshot(ctx context.Context, sn task.Snapshot) (err error) {
	defer classify(&err)
	id, err := checkSnapshot(sn)
	if err != nil {
		return err
	}
	var n int
	err = s.pool.QueryRow(ctx, saveSnapshot,
		id, sn.Attempt, sn.FromSeq, sn.Append, sn.Seq, sn.Progress, int64(sn.StreamPos), s.now()).Scan(&n)
	if err == nil && n == 0 {
		err = s.whyNotRunning(ctx, id, sn.Attempt, sn.FromSeq)
	}
	if err != nil {
		return fmt.Errorf("save snapshot of task %s attempt %d seq %d..%d: %w",
			id, sn.Attempt, sn.FromSeq, sn.Seq, err)
	}
	return nil
}

// dropChunks deletes a task's output chunks, in the transaction that folded
// them into tasks.output or replaced the attempt they belong to.
func dropChunks(ctx context.Context, tx pgx.Tx, taskID string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM task_output WHERE task_id = $1`, taskID); err != nil {
		return fmt.Errorf("drop output chunks of task %s: %w", taskID, err)
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
