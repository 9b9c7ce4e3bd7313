package natsbus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
)

// A process that starts against streams already as they should be leaves
// them alone (an update racing another process's consumer creation is a
// data race inside nats-server); one whose settings differ updates them.
func TestConnectUpdatesOnlyStreamsThatDiffer(t *testing.T) {
	t.Parallel()
	_, url := setup(t)
	nc, js := plainClient(t, url)
	updated := make(chan string, 16)
	if _, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.UPDATED.>", func(m *nats.Msg) {
		updated <- m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// next is the stream of the next update advisory.
	next := func(what string) string {
		t.Helper()
		return eventually.Receive(t, updated, what)
	}
	// marker updates the dispatch stream itself: its advisory comes after
	// any that a connect before it caused.
	marker := func() {
		t.Helper()
		ctx := ctxT(t)
		s, err := js.Stream(ctx, natsbus.DispatchStream)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Description += "."
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}

	connect(t, url) // the same settings
	marker()
	if s := next("the marker"); s != natsbus.DispatchStream {
		t.Fatalf("a connect with the same settings updated %s", s)
	}
	// The marker changed the dispatch stream's description: a connect puts
	// it back, and changes the log's retention, and nothing else.
	b, err := natsbus.Connect(context.Background(), url, natsbus.Config{Name: t.Name(), Logger: quiet,
		TaskRetention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := map[string]bool{next("an update"): true, next("a second update"): true}
	if !got[natsbus.TasksStream] || !got[natsbus.DispatchStream] {
		t.Fatalf("updated %v; want both streams", got)
	}
	marker()
	if s := next("the marker"); s != natsbus.DispatchStream {
		t.Fatalf("one more update of %s", s)
	}
}
