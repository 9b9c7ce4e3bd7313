package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// taskColumns are the columns every task query returns, in the order
// scanTask reads them. The output is the task's whole output: tasks.output
// (for a running attempt, the prefix it kept) followed by the chunks the
// running attempt's snapshots appended (task_output, migration 00008). A
// query of a table aliased otherwise, or whose rows were just
// changed in a way the chunks must not be added to, uses storedColumns.
const taskColumns = taskColumnsHead + foldedOutput + taskColumnsTail

// foldedOutput is a task's whole output in a query or an UPDATE of tasks:
// its stored output and its running attempt's chunks, in seq order.
const foldedOutput = `tasks.output || coalesce((SELECT string_agg(o.text, '' ORDER BY o.seq)
		FROM task_output o WHERE o.task_id = tasks.id AND o.attempt = tasks.attempt), '')`

// storedColumns are taskColumns with tasks.output as it is stored: for a
// task that has no chunks (it is not running, or its chunks were just folded
// into output in the same transaction, or it was just created).
const storedColumns = taskColumnsHead + `output` + taskColumnsTail

const (
	taskColumnsHead = `id, conversation_id, user_id, status, attempt, seq, progress, input,
	`
	taskColumnsTail = `, error, result_ref, runner_id, lease_until, stream_pos, cancel_requested,
	created_at, updated_at, finished_at, assistant_message_id, submit_attempt, keep, attachments,
	preamble`
)

// taskRow is a task with the bookkeeping only the store needs.
type taskRow struct {
	task.Task
	// assistantMessageID is the placeholder this task fills. Messages are
	// never updated by task id: a purged id may be submitted again.
	assistantMessageID string
	// submitAttempt is the attempt the current submission started with.
	submitAttempt int
	// attachments are the upload ids the submit attached, in order.
	attachments []string
}

// attemptsLeft reports whether a lost lease may start another attempt of
// the current submission.
func (r taskRow) attemptsLeft(max int) bool {
	return r.Attempt-r.submitAttempt+1 < max
}

// scanTask reads one row of taskColumns.
func scanTask(row pgx.Row) (taskRow, error) {
	var (
		r                    taskRow
		runnerID             *string
		leaseUntil, finished *time.Time
		preamble             []byte
	)
	err := row.Scan(&r.ID, &r.ConversationID, &r.UserID, &r.Status, &r.Attempt, &r.Seq,
		&r.Progress, &r.Input, &r.Output, &r.Error, &r.ResultRef, &runnerID, &leaseUntil,
		&r.StreamPos, &r.CancelRequested, &r.CreatedAt, &r.UpdatedAt, &finished,
		&r.assistantMessageID, &r.submitAttempt, &r.Keep, &r.attachments, &preamble)
	if err != nil {
		return taskRow{}, err
	}
	if r.Preamble, err = decodePreamble(preamble); err != nil {
		return taskRow{}, fmt.Errorf("task %s: %w", r.ID, err)
	}
	if runnerID != nil {
		r.RunnerID = *runnerID
	}
	if leaseUntil != nil {
		r.LeaseUntil = leaseUntil.UTC()
	}
	if finished != nil {
		r.FinishedAt = finished.UTC()
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// scanTasks reads every row of a query of taskColumns.
func scanTasks(rows pgx.Rows) ([]taskRow, error) {
	defer rows.Close()
	var out []taskRow
	for rows.Next() {
		r, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	return out, nil
}

// tasksOf drops the bookkeeping.
func tasksOf(rows []taskRow) []task.Task {
	out := make([]task.Task, len(rows))
	for i, r := range rows {
		out[i] = r.Task
	}
	return out
}
