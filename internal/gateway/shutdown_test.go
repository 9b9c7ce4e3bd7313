package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/task"
)

// stuckLogBus is the real bus whose first log read hangs until release
// closes, whatever its context says (a read stuck on a socket).
type stuckLogBus struct {
	gateway.Bus
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (b *stuckLogBus) ReadLog(ctx context.Context, id string, after task.Position, from uint64) ([]task.Msg, error) {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
	return b.Bus.ReadLog(ctx, id, after, from)
}

// Shutdown waits for the goroutines streams start: an SSE stream's
// catch-up still reading the log when the stream ends is waited for, so
// nothing of the gateway runs on after Shutdown returns.
func TestShutdownWaitsForCatchUps(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	taskID := newID()
	if r := e.dial("u1").submit(taskID, newID(), "hello"); r.Type != "submitted" {
		t.Fatalf("submit: %+v", r)
	}

	b := &stuckLogBus{Bus: natsgateway.New(e.bus), entered: make(chan struct{}), release: make(chan struct{})}
	gw, err := gateway.New(gateway.Config{AuthSecret: e.secret, Logger: quietLogger()}, e.store, b)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)

	req, _ := http.NewRequest("GET", srv.URL+"/v1/tasks/"+taskID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.token("u1", time.Hour))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	<-b.entered // the stream's catch-up is reading the log

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- gw.Shutdown(ctx) }()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
	} // the stream ends: its handler has returned
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a catch-up was still reading the log", err)
	default:
	}
	close(b.release)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
