package natsbus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/task"
)

// What the client buffered while the write gate is shut never reaches the
// server, even after the gate opens again and the client reconnects: a
// runner paused past its lease sends nothing it buffered before the pause.
func TestWriteGateDropsWhatWasBuffered(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	var open atomic.Bool
	open.Store(true)
	b, err := natsbus.Connect(context.Background(), url, natsbus.Config{Name: t.Name(),
		FetchWait: 200 * time.Millisecond, Logger: quiet, PublishAckTimeout: 300 * time.Millisecond,
		WriteGate: open.Load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx := ctxT(t)

	p := b.NewPublisher()
	if err := p.Publish(delta(taskA, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Flush(ctx); err != nil {
		t.Fatalf("flush with the gate open: %v", err)
	}

	open.Store(false)
	stale := b.NewPublisher()
	if err := stale.Publish(delta(taskA, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Flush(ctx); err == nil {
		t.Fatal("an event was acknowledged while the gate was shut")
	}
	if b.Conn().Status() == nats.CONNECTED {
		eventually.True(t, "the shut gate to close the connection", func() bool { return b.Conn().Status() != nats.CONNECTED })
	}

	open.Store(true)
	eventually.True(t, "the connection to come back", func() bool { return b.Conn().Status() == nats.CONNECTED })
	if _, err := b.PublishEventSync(ctx, delta(taskA, 3)); err != nil {
		t.Fatalf("publish after the gate opened: %v", err)
	}
	got, err := b.ReadLog(ctx, taskA, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, m := range got {
		seqs = append(seqs, m.Event.Seq)
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 3 {
		t.Fatalf("log holds seqs %v, want [1 3]: the event buffered behind the shut gate must be dropped", seqs)
	}
}
