// Package natsgateway adapts *natsbus.Bus to gateway.Bus, so the gateway
// package depends only on its small interface, and both cmd/gateway and the
// end-to-end tests wire the real bus the same way.
package natsgateway

import (
	"context"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/task"
)

// New adapts b to gateway.Bus.
func New(b *natsbus.Bus) gateway.Bus { return gatewayBus{b} }

type gatewayBus struct{ *natsbus.Bus }

func toGateway(m natsbus.Msg) gateway.Msg {
	return gateway.Msg{Event: m.Event, Data: m.Data, StreamPos: m.StreamPos}
}

func (g gatewayBus) SubscribeTask(taskID string, fn func(gateway.Msg), lost func()) (func() error, error) {
	return g.Bus.SubscribeTask(taskID, func(m natsbus.Msg) { fn(toGateway(m)) }, lost)
}

func (g gatewayBus) ReadLog(ctx context.Context, taskID string, after task.Position, fromStreamPos uint64) ([]gateway.Msg, error) {
	ms, err := g.Bus.ReadLog(ctx, taskID, after, fromStreamPos)
	if err != nil {
		return nil, err
	}
	out := make([]gateway.Msg, len(ms))
	for i, m := range ms {
		out[i] = toGateway(m)
	}
	return out, nil
}

func (g gatewayBus) PublishEvent(ctx context.Context, e task.Event) error {
	_, err := g.Bus.PublishEventSync(ctx, e)
	return err
}
