package runner

import (
	"context"
	"testing"
	"time"
)

// A wait to publish again ends when the NATS connection comes back (also
// when it came back during the try that failed), however long the backoff
// had grown, and the next wait starts small again.
func TestRetryWaitEndsWhenNATSIsBack(t *testing.T) {
	r := &Runner{back: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waiting := r.natsBack()
	done := make(chan time.Duration, 1)
	go func() {
		next, ok := retryWait(ctx, time.Hour, waiting)
		if !ok {
			next = -1
		}
		done <- next
	}()
	r.reconnected()
	select {
	case next := <-done:
		if next != 100*time.Millisecond {
			t.Fatalf("next wait %v, want 100ms", next)
		}
	case <-ctx.Done():
		t.Fatal("the wait did not end when NATS came back")
	}
	select {
	case <-waiting:
	default:
		t.Fatal("the channel taken before the reconnect is still open")
	}
	if r.natsBack() == waiting {
		t.Fatal("no new channel for the next reconnect")
	}
	if next, ok := retryWait(ctx, time.Millisecond, r.natsBack()); !ok || next != 2*time.Millisecond {
		t.Fatalf("a wait that runs out: next %v ok %v, want 2ms", next, ok)
	}
}
