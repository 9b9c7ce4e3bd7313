package natsbus

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// PublishUserTask sends the "task" event of t to every tab of userID, on
// every gateway. It is a core publish: a tab that misses one sees the task's
// state on its next snapshot or history read.
func (b *Bus) PublishUserTask(userID string, t task.Task) error {
	if err := b.nc.Publish(UserSubject(userID), protocol.TaskEvent(t)); err != nil {
		return fmt.Errorf("publish task %s to its user: %w", t.ID, err)
	}
	return nil
}

// SubscribeUser calls fn with the wire JSON of every "task" event of userID,
// in order, one call at a time. A gateway holds one such subscription per
// user with tabs attached. The server has it when SubscribeUser returns.
func (b *Bus) SubscribeUser(userID string, fn func(data []byte)) (unsubscribe func() error, err error) {
	return b.subscribe(UserSubject(userID), func(m *nats.Msg) { fn(m.Data) }, nil, true)
}
