package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/task"
)

// blockingSink is a sink whose sendEvent blocks, while blocked is open.
type blockingSink struct {
	entered chan struct{}   // receives once per blocked send
	blocked chan struct{}   // closed: sends go through
	sent    func(seq int64) // if set, called at the end of each send
	mu      sync.Mutex
	got     []int64
}

func (k *blockingSink) sendSnapshot(task.Task, []byte) bool { return true }
func (k *blockingSink) waitRoom(context.Context)            {}
func (k *blockingSink) sendEvent(m task.Msg) bool {
	select {
	case <-k.blocked:
	default:
		k.entered <- struct{}{}
		<-k.blocked
	}
	k.mu.Lock()
	k.got = append(k.got, m.Event.Seq)
	k.mu.Unlock()
	if k.sent != nil {
		k.sent(m.Event.Seq)
	}
	return true
}

func delta(seq int64) task.Msg {
	return task.Msg{Event: task.Event{Type: task.EventDelta, TaskID: "t", Attempt: 1, Seq: seq}, Data: []byte("{}")}
}

// A follower delivering a batch of its catch-up does not hold the lock the
// live feed takes: while its sink is busy with the batch, the NATS
// goroutine hands it the next live event at once (it is buffered) and goes
// on to the task's other tabs. The events still arrive once each, in order.
func TestCatchUpBatchDoesNotHoldUpTheLiveFeed(t *testing.T) {
	h := &hub{metrics: newMetrics(), maxBuffer: 1 << 20, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	k := &blockingSink{entered: make(chan struct{}, 1), blocked: make(chan struct{})}
	f := newFollower(context.Background(), h, "t", k, nil)
	f.topic = &topic{}
	f.last = task.Position{Attempt: 1, Seq: 0}
	for seq := int64(1); seq <= 3; seq++ {
		f.onLive(delta(seq)) // filling: buffered
	}
	done := make(chan struct{})
	go func() { defer close(done); f.catchUp(false) }()
	<-k.entered // the catch-up is delivering its batch, blocked in the sink

	live := make(chan struct{})
	go func() { defer close(live); f.onLive(delta(4)) }()
	eventually.Receive(t, live, "the live feed to go on while a catch-up batch is delivered")
	close(k.blocked)
	<-done
	eventually.True(t, "delivery", func() bool { k.mu.Lock(); defer k.mu.Unlock(); return len(k.got) == 4 })
	for i, s := range k.got {
		if s != int64(i+1) {
			t.Fatalf("delivered %v", k.got)
		}
	}
	f.onLive(delta(5)) // caught up: delivered directly
	eventually.True(t, "live delivery", func() bool { k.mu.Lock(); defer k.mu.Unlock(); return len(k.got) == 5 })
}

// Nothing is delivered after stop returns, even by a batch under way: stop
// waits for the send in progress, and what comes live afterwards is dropped.
func TestStopWaitsForABatch(t *testing.T) {
	h := &hub{metrics: newMetrics(), maxBuffer: 1 << 20, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	k := &blockingSink{entered: make(chan struct{}, 1), blocked: make(chan struct{})}
	var returned atomic.Bool // stop has returned
	k.sent = func(seq int64) {
		if returned.Load() {
			t.Errorf("seq %d delivered after stop returned", seq)
		}
	}
	f := newFollower(context.Background(), h, "t", k, nil)
	f.topic = &topic{}
	f.last = task.Position{Attempt: 1, Seq: 0}
	for seq := int64(1); seq <= 3; seq++ {
		f.onLive(delta(seq))
	}
	caughtUp := make(chan struct{})
	go func() { defer close(caughtUp); f.catchUp(false) }()
	<-k.entered // the batch's first send is under way
	stopped := make(chan struct{})
	go func() { defer close(stopped); f.stop(); returned.Store(true) }()
	// Release the send once stop is under way. Whenever stop returns, the
	// sink sees it: a stop that did not wait for the send would return
	// while the send is still blocked.
	eventually.True(t, "stop to begin", f.stopped.Load)
	close(k.blocked)
	<-stopped
	<-caughtUp
	k.mu.Lock()
	n := len(k.got)
	k.mu.Unlock()
	if n != 1 {
		t.Fatalf("the batch delivered %v; want its first event only (the one under way when stop came)", k.got)
	}
	// A live event after stop: onLive delivers on its own goroutine or
	// buffers it for a catch-up; it must do neither.
	f.onLive(delta(4))
	k.mu.Lock()
	got := slices.Clone(k.got)
	k.mu.Unlock()
	f.mu.Lock()
	buffered := len(f.buf)
	f.mu.Unlock()
	if len(got) != n || buffered != 0 {
		t.Fatalf("after stop: delivered %v, %d buffered", got, buffered)
	}
}

// slowUserBus blocks SubscribeUser for user "slow" until release closes.
type slowUserBus struct {
	Bus
	release chan struct{}
	entered chan struct{}
}

func (b *slowUserBus) SubscribeUser(user string, fn func([]byte)) (func() error, error) {
	if user == "slow" {
		b.entered <- struct{}{}
		<-b.release
		return nil, errors.New("down")
	}
	return func() error { return nil }, nil
}

// The user hub's lock is not held across a subscription round trip: a tab
// of another user attaches while the first user's subscribe hangs.
func TestUserSubscribeDoesNotHoldUpOtherUsers(t *testing.T) {
	bus := &slowUserBus{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	h := newUserHub(bus, slog.New(slog.NewTextHandler(io.Discard, nil)))
	slowErr := make(chan error, 1)
	go func() { slowErr <- h.attach("slow", &wsSession{}) }()
	<-bus.entered
	fast := make(chan error, 1)
	go func() { fast <- h.attach("fast", &wsSession{}) }()
	if err := eventually.Receive(t, fast, "another user's tab to attach while a subscribe hangs"); err != nil {
		t.Fatal(err)
	}
	// A second tab of the slow user waits for that subscription, and fails with it.
	second := make(chan error, 1)
	go func() { second <- h.attach("slow", &wsSession{}) }()
	close(bus.release)
	if err := <-slowErr; err == nil {
		t.Fatal("the failed subscribe was not reported")
	}
	if err := <-second; err == nil {
		t.Fatal("a tab waiting for a failed subscribe was not told")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.users["slow"]; ok {
		t.Fatal("a failed user topic stayed")
	}
}

// BenchmarkAttachToBusyTopic: tabs joining and leaving a task that 10,000
// tabs follow. Followers are appended in place and removed lazily, so a
// join no longer copies every follower (about 400 MB of garbage for 10,000
// joins one by one).
func BenchmarkAttachToBusyTopic(b *testing.B) {
	t := &topic{}
	h := &hub{metrics: newMetrics(), topics: map[string]*topic{"t": t}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for range 10000 {
		f := &follower{hub: h, taskID: "t"}
		if err := h.attach(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		f := &follower{hub: h, taskID: "t"}
		if err := h.attach(f); err != nil {
			b.Fatal(err)
		}
		h.detach(f)
	}
}
