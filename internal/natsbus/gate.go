package natsbus

import (
	"context"
	"errors"
	"net"
	"time"
)

// errGateClosed is what a write refused by Config.WriteGate returns.
var errGateClosed = errors.New("nats: write refused: the process must stay quiet")

// gatedDialer dials plain TCP connections whose writes pass a gate first.
// The NATS client buffers what it publishes and writes the buffer to the
// socket from its own flusher goroutine, so a runner that was paused past
// its lease (SIGSTOP, a long GC stall, a frozen VM) would, the moment it
// resumes, send events it buffered before the pause, before any of its own
// code could check the lease. The gate is checked in that write: when it is
// shut, the buffer is dropped and the connection closed (the client then
// reconnects, and publishers whose events were dropped publish them again
// if they still may).
type gatedDialer struct {
	timeout time.Duration
	open    func() bool
}

func (d gatedDialer) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, open: d.open}, nil
}

type gatedConn struct {
	net.Conn
	open func() bool
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if !c.open() {
		_ = c.Conn.Close()
		return 0, errGateClosed
	}
	return c.Conn.Write(p)
}
