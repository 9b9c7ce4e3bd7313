// Package natsrunner adapts *natsbus.Bus to runner.Bus, so that the runner
// package itself depends only on its small interfaces and both cmd/runner
// and the runner's tests wire the real bus the same way.
package natsrunner

import (
	"context"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/task"
)

// Bus is a runner.Bus on a NATS connection.
type Bus struct {
	*natsbus.Bus
}

var _ runner.Bus = Bus{}

// New returns b as a runner.Bus.
func New(b *natsbus.Bus) Bus { return Bus{Bus: b} }

// Consume implements runner.Bus.
func (b Bus) Consume(ctx context.Context, capacity int, handle func(ctx context.Context, d runner.Dispatch) (func(), error)) error {
	return b.Bus.Consume(ctx, capacity, func(ctx context.Context, d natsbus.Dispatch) (func(), error) {
		return handle(ctx, runner.Dispatch{TaskID: d.TaskID, Attempt: d.Attempt})
	})
}

// NewPublisher implements runner.Bus.
func (b Bus) NewPublisher() runner.Publisher { return b.Bus.NewPublisher() }

// PublishUserTask implements runner.Bus.
func (b Bus) PublishUserTask(userID string, t task.Task) error {
	return b.Bus.PublishUserTask(userID, t)
}
