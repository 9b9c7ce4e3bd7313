package natsbus

import (
	"context"
	"errors"
	"net"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/task"
)

// errDisconnected is the cause of an unavailable error when the connection
// is not up at the moment of a call.
var errDisconnected = errors.New("nats: not connected")

// classify turns an error that means "NATS cannot be reached right now"
// (disconnected, reconnecting, closed, no JetStream answer in time) into
// task.Unavailable, once, at the bus's boundary, so the gateway answers
// `unavailable` rather than `internal`. Other errors pass through.
func classify(errp *error) {
	if err := *errp; err != nil && task.ErrorCode(err) == task.CodeInternal && down(err) {
		*errp = task.Unavailable("event bus", err)
	}
}

func down(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	for _, target := range []error{errDisconnected, nats.ErrConnectionClosed, nats.ErrConnectionReconnecting,
		nats.ErrConnectionDraining, nats.ErrNoServers, nats.ErrTimeout, nats.ErrDisconnected,
		nats.ErrStaleConnection, nats.ErrNoResponders, nats.ErrReconnectBufExceeded,
		jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled, context.DeadlineExceeded} {
		if errors.Is(err, target) {
			return true
		}
	}
	return errors.As(err, &netErr)
}

// connected fails fast, as unavailable, while the connection is not up: a
// request would otherwise wait for its timeout.
func (b *Bus) connected() error {
	if s := b.nc.Status(); s != nats.CONNECTED {
		return task.Unavailable("event bus", errors.Join(errDisconnected, errors.New("connection "+s.String())))
	}
	return nil
}
