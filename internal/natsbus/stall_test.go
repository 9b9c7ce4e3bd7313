package natsbus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
)

// A publish that nothing stores and nothing refuses (a stream without a
// leader, while a gateway still listens on the subject) has FlushProgress
// give up after its stall, long before the publish timeout; Flush would
// wait for that timeout.
func TestFlushProgressGivesUpWhenNoAckComes(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t)
	b, err := natsbus.Connect(context.Background(), url, natsbus.Config{
		Name: t.Name(), PublishAckTimeout: time.Minute, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := ctxT(t)

	p := b.NewPublisher()
	if err := p.Publish(delta(taskA, 1)); err != nil {
		t.Fatal(err)
	}
	if pos, err := p.FlushProgress(ctx, 200*time.Millisecond); err != nil || pos != 1 {
		t.Fatalf("FlushProgress with the stream up = %d, %v", pos, err)
	}

	// The stream goes; a plain subscriber keeps the subject answered, so
	// the server does not refuse the publish ("no responders") either.
	nc, js := plainClient(t, url)
	if err := js.DeleteStream(ctx, natsbus.TasksStream); err != nil {
		t.Fatal(err)
	}
	sub, err := nc.Subscribe(natsbus.TaskSubject(taskA), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // test cleanup
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	p = b.NewPublisher()
	for seq := int64(2); seq <= 4; seq++ {
		if err := p.Publish(delta(taskA, seq)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = p.FlushProgress(ctx, 200*time.Millisecond)
	if !errors.Is(err, natsbus.ErrAckStalled) {
		t.Fatalf("FlushProgress with acks that never come = %v, want ErrAckStalled", err)
	}
	if ctx.Err() != nil {
		t.Fatal("FlushProgress waited for the test's deadline")
	}
}
