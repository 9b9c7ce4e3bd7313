package gateway

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/task"
)

// unsubBus is a Bus whose first unsubscribe of task "slow" blocks until
// release closes, as nats.go's does while its flusher holds the
// connection's lock.
type unsubBus struct {
	Bus
	slow    atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (b *unsubBus) SubscribeTask(taskID string, fn func(task.Msg), lost func()) (func() error, error) {
	return func() error {
		if taskID == "slow" && b.slow.Add(1) == 1 {
			close(b.entered)
			<-b.release
		}
		return nil
	}, nil
}

// The hub's locks are not held across an unsubscribe: while the last
// follower of one task is leaving and its unsubscribe is stuck on the
// connection, followers of other tasks (and of the same one) attach and
// detach.
func TestUnsubscribeHoldsNoHubLock(t *testing.T) {
	b := &unsubBus{entered: make(chan struct{}), release: make(chan struct{})}
	h := newHub(b, slog.New(slog.NewTextHandler(io.Discard, nil)), newMetrics(), 16, 0, 1<<20)
	follow := func(id string) *follower {
		f := newFollower(context.Background(), h, id, &blockingSink{blocked: closedChan()}, nil)
		if err := h.attach(f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	slow := follow("slow")
	left := make(chan struct{})
	go func() { defer close(left); h.detach(slow) }()
	<-b.entered

	done := make(chan struct{})
	go func() {
		defer close(done)
		h.detach(follow("other"))
		h.detach(follow("slow")) // a topic of its own, not the one closing
	}()
	eventually.Receive(t, done, "attach and detach while another task's unsubscribe hangs")
	close(b.release)
	<-left
	if n := len(h.topics); n != 0 {
		t.Fatalf("%d topics left after every follower left", n)
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
