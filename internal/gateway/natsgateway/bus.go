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

var _ gateway.Bus = gatewayBus{}

// gatewayBus is the bus as it is, but for PublishEvent: the gateway waits
// for the log to have the event and has no use for its stream position.
type gatewayBus struct{ *natsbus.Bus }

func (g gatewayBus) PublishEvent(ctx context.Context, e task.Event) error {
	_, err := g.Bus.PublishEventSync(ctx, e)
	return err
}
