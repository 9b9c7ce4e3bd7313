package runner

import (
	"context"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// The runner depends on these small interfaces, not on Postgres or NATS, so
// that only cmd/runner knows the concrete store and bus.

// Store is the part of the source of truth a runner writes, every write
// fenced by the attempt it holds: task.RunnerStore, declared with the domain
// so the Postgres store states that it has it.
type Store = task.RunnerStore

// Dispatch asks a runner to run a task.
type Dispatch struct {
	TaskID  string
	Attempt int
}

// Bus is the part of NATS a runner uses.
type Bus interface {
	// Consume hands dispatches to handle, at most capacity at a time,
	// pulling one only when a slot is free. handle decides quickly: a nil
	// error acknowledges the dispatch (claimed, or nobody's to run any
	// more), an error has it delivered again later. A non-nil run is the
	// attempt itself, run in the same slot after the acknowledgement. When
	// ctx is done Consume pulls nothing more, waits for handlers and runs,
	// and returns; the ctx handlers get is not cancelled by it.
	Consume(ctx context.Context, capacity int, handle func(ctx context.Context, d Dispatch) (run func(), err error)) error
	// Dispatch asks a runner (any, this one included) to run the task's
	// attempt: after a restart, the new attempt goes through the queue like
	// any other.
	Dispatch(ctx context.Context, taskID string, attempt int) error
	// NewPublisher returns a publisher for the events of one attempt.
	NewPublisher() Publisher
	// PublishUserTask sends the user's "task" event (PROTOCOL.md section 4).
	PublishUserTask(userID string, t task.Task) error
	// SubscribeCancels calls fn with the task id of every cancel request,
	// until unsubscribe is called; ctx carries the request's trace context.
	SubscribeCancels(fn func(ctx context.Context, taskID string)) (unsubscribe func() error, err error)
	// OnReconnect registers fn to run whenever the connection to NATS
	// comes back after it was lost.
	OnReconnect(fn func())
}

// Publisher publishes the events of one attempt to the task's log, in order.
type Publisher interface {
	// Publish sends events as one log message without waiting for its
	// acknowledgement: one event, or a pack of consecutive deltas
	// (protocol.EncodePack). Its message id names the range, so the same
	// events published again the same way are a repeat to the log.
	Publish(events ...task.Event) error
	// FlushProgress waits until every event published so far is
	// acknowledged and returns the stream position of the last one. It
	// fails when no acknowledgement came for stall while some were awaited
	// (a stream without a leader drops a publish without refusing it).
	FlushProgress(ctx context.Context, stall time.Duration) (streamPos uint64, err error)
	// Echo sends e again without waiting for, or counting on, an
	// acknowledgement: a copy for live listeners that missed it, which the
	// log stores unless it has it already.
	Echo(events ...task.Event) error
}
