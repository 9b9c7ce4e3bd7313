// Package natstest starts an in-process NATS server with JetStream for tests.
package natstest

import (
	"testing"

	"github.com/tether-dev/tether/internal/natsbus"
)

// Start runs a NATS server with JetStream on a random 127.0.0.1 port, storing
// in a temporary directory, and shuts it down when the test ends. It returns
// the client URL.
func Start(t testing.TB) string {
	t.Helper()
	srv, err := natsbus.StartServer(natsbus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start NATS: %v", err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv.ClientURL()
}
