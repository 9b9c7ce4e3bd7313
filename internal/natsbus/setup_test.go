package natsbus_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/task"
)

// quiet keeps expected warnings out of test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// setup starts a server and connects one Bus to it.
func setup(t testing.TB) (*natsbus.Bus, string) {
	t.Helper()
	url := natstest.Start(t)
	return connect(t, url), url
}

func connect(t testing.TB, url string) *natsbus.Bus {
	t.Helper()
	b, err := natsbus.Connect(context.Background(), url, natsbus.Config{
		Name: t.Name(), FetchWait: 200 * time.Millisecond, Logger: quiet,
	})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// plainClient connects a NATS client of the test's own to url, closed when
// the test ends: to watch subjects and to change streams behind a Bus.
func plainClient(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func delta(taskID string, seq int64) task.Event {
	return task.Event{Type: task.EventDelta, TaskID: taskID, Seq: seq, Attempt: 1, Text: "t" + itoa(seq) + " "}
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

const (
	taskA = "0190f3c4-5b6a-7c8d-9e0f-00000000000a"
	taskB = "0190f3c4-5b6a-7c8d-9e0f-00000000000b"
)
