package gateway

import (
	"context"

	"github.com/tether-dev/tether/internal/task"
)

// Bus is what the gateway needs of NATS.
type Bus interface {
	// SubscribeTask follows a task's live events, one call of fn at a time,
	// in order. The server must have the subscription before anything the
	// gateway sends after it returns (a log read, a dispatch), so nothing
	// published afterwards is missed. A live Msg's Event holds the type,
	// seq, attempt and status (the rest is in Data). lost is called when
	// live messages were dropped on the way in (the gateway fell behind).
	SubscribeTask(taskID string, fn func(task.Msg), lost func()) (unsubscribe func() error, err error)
	// ReadLog returns the logged events of a task that sort after the
	// position after, in (attempt, seq) order.
	ReadLog(ctx context.Context, taskID string, after task.Position, fromStreamPos uint64) ([]task.Msg, error)
	// PublishEvent publishes an event the store assigned (no runner holds the task).
	PublishEvent(ctx context.Context, e task.Event) error
	PublishUserTask(userID string, t task.Task) error
	// PublishUser sends a user-level event (its wire JSON) to every tab of
	// the user, on every gateway.
	PublishUser(userID string, data []byte) error
	SubscribeUser(userID string, fn func(data []byte)) (unsubscribe func() error, err error)
	Dispatch(ctx context.Context, taskID string, attempt int) error
	// DispatchAsync is Dispatch without an acknowledgement (maintenance
	// dispatches a task that stays pending again); ctx carries only the
	// trace context to the runner.
	DispatchAsync(ctx context.Context, taskID string, attempt int) error
	// RequestCancel asks the runner holding the task to stop; ctx carries
	// only the trace context.
	RequestCancel(ctx context.Context, taskID string) error
	Ready(ctx context.Context) error
	// OnReconnect registers fn to run whenever the connection to NATS comes
	// back: live events published meanwhile were missed, so every follower
	// catches up from the log.
	OnReconnect(fn func())
}
