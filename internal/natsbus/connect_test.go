package natsbus_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
)

// closedPort returns the address of a port that was free a moment ago.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestConnectUnreachable(t *testing.T) {
	t.Parallel()
	url := "nats://user:hunter2@" + closedPort(t)
	_, err := natsbus.Connect(context.Background(), url, natsbus.Config{
		MaxElapsed: 300 * time.Millisecond, ConnectTimeout: 100 * time.Millisecond, Logger: quiet,
	})
	if err == nil {
		t.Fatal("Connect to a closed port succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"connect to NATS at nats://redacted@127.0.0.1:", "gave up after", "attempts", "no servers available"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("error %q shows the password", msg)
	}
}

func TestConnectCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := natsbus.Connect(ctx, "nats://"+closedPort(t), natsbus.Config{Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("Connect with a cancelled context: %v", err)
	}
}

// Processes starting together all end up with the same streams.
func TestConnectRace(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			b, err := natsbus.Connect(context.Background(), url, natsbus.Config{Logger: quiet, TaskRetention: time.Hour})
			if err != nil {
				errs <- err
				return
			}
			defer b.Close()
			errs <- b.Ready(context.Background())
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b := connect(t, url)
	js, _ := jetstream.New(b.Conn())
	s, err := js.Stream(ctxT(t), natsbus.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	// connect's own Config left TaskRetention at its default and updated the stream.
	if c := s.CachedInfo().Config; c.MaxAge != 48*time.Hour || c.Duplicates != 2*time.Minute || c.Storage != jetstream.FileStorage {
		t.Fatalf("tasks stream config %+v", c)
	}
	d, err := js.Stream(ctxT(t), natsbus.DispatchStream)
	if err != nil {
		t.Fatal(err)
	}
	if d.CachedInfo().Config.Retention != jetstream.WorkQueuePolicy {
		t.Fatalf("dispatch stream retention %v", d.CachedInfo().Config.Retention)
	}
}

func TestReadyAfterServerStops(t *testing.T) {
	t.Parallel()
	srv, err := natsbus.StartServer(natsbus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b := connect(t, srv.ClientURL())
	if err := b.Ready(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	eventually.True(t, "Ready to fail", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return b.Ready(ctx) != nil
	})
}

func TestStartServerErrors(t *testing.T) {
	t.Parallel()
	if _, err := natsbus.StartServer(natsbus.ServerConfig{Listen: "127.0.0.1:0"}); err == nil {
		t.Error("no store dir accepted")
	}
	if _, err := natsbus.StartServer(natsbus.ServerConfig{Listen: "nonsense", StoreDir: t.TempDir()}); err == nil {
		t.Error("bad listen address accepted")
	}
}
