package compat_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tether-dev/tether/internal/compat"
	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
)

// env is a whole Tether in one process: a real Postgres schema, NATS on a
// random port, one runner with the demo engine, and a gateway with the
// section 11 endpoints behind an httptest server, in anonymous mode (an API
// key names a user).
type env struct {
	t     testing.TB
	store *postgres.Store
	srv   *httptest.Server
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func setup(t testing.TB, gc gateway.Config) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := pgtest.New(t, postgres.Config{})
	bus, err := natsbus.Connect(ctx, natstest.Start(t), natsbus.Config{Name: t.Name()})
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(bus.Close)

	demo, _ := engine.New("demo")
	r, err := runner.New(runner.Config{Engine: demo, Logger: quiet()}, store, natsrunner.New(bus))
	if err != nil {
		t.Fatalf("runner: %v", err)
	}
	rctx, rstop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	t.Cleanup(func() { rstop(); <-done })

	gc.Logger = quiet()
	gc.CookieKey = []byte("compat-test-cookie-key-0123456789")
	gw, err := gateway.New(gc, store, natsgateway.New(bus))
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	compat.Mount(gw, compat.Config{})
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Shutdown(sctx)
		srv.Close()
	})
	return &env{t: t, store: store, srv: srv}
}

// client is the official openai-go client for the API key key (one user
// per key), with the SDK's own retries off so every request is counted.
func (e *env) client(key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(e.srv.URL + "/v1/"),
		option.WithAPIKey(key), option.WithMaxRetries(0)}, opts...)...)
}

// tasks counts the tasks stored.
func (e *env) tasks() int {
	e.t.Helper()
	var n int
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&n); err != nil {
		e.t.Fatalf("count tasks: %v", err)
	}
	return n
}
