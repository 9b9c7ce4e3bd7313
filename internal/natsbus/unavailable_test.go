package natsbus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/task"
)

// TestDisconnectedIsUnavailable: while the NATS server is away, what the
// gateway asks of the bus answers task.CodeUnavailable, at once for a
// subscription, and everything works again once it is back.
func TestDisconnectedIsUnavailable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := natsbus.StartServer(natsbus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	b := connect(t, srv.ClientURL())
	ctx := ctxT(t)
	srv.Shutdown()
	srv.WaitForShutdown()
	eventually.True(t, "the client to notice", func() bool { return b.Conn().Status() != nats.CONNECTED })

	code := func(err error) task.Code { return task.ErrorCode(err) }
	if err := b.Ready(ctx); code(err) != task.CodeUnavailable {
		t.Errorf("Ready: %v", err)
	}
	start := time.Now()
	if _, err := b.SubscribeTask("t1", func(task.Msg) {}, nil); code(err) != task.CodeUnavailable {
		t.Errorf("SubscribeTask: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("a subscribe took %v to fail while disconnected", time.Since(start))
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := b.Dispatch(short, "t1", 1); code(err) != task.CodeUnavailable {
		t.Errorf("Dispatch: %v", err)
	}
	if _, err := b.ReadLog(short, "t1", task.Position{}, 0); code(err) != task.CodeUnavailable {
		t.Errorf("ReadLog: %v", err)
	}

	srv, err = natsbus.StartServer(natsbus.ServerConfig{Listen: addr, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	eventually.True(t, "ready again", func() bool { return b.Ready(ctx) == nil })
}
