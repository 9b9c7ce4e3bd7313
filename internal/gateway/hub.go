package gateway

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// hub keeps one upstream NATS subscription per followed task for this
// gateway and fans each event out to every follower (tab or SSE stream). A
// topic remembers its most recent events, so a tab that re-subscribes (the
// F5 case) is caught up from memory instead of the log, and lingers a while
// after its last follower leaves for the same reason.
type hub struct {
	bus     Bus
	log     *slog.Logger
	metrics *metrics
	recent  int
	linger  time.Duration

	mu     sync.Mutex
	topics map[string]*topic
}

func newHub(bus Bus, log *slog.Logger, m *metrics, recent int, linger time.Duration) *hub {
	return &hub{bus: bus, log: log, metrics: m, recent: recent, linger: linger, topics: map[string]*topic{}}
}

type topic struct {
	id    string
	ready chan struct{} // closed once the upstream subscription is set up
	err   error         // set before ready is closed when it failed

	mu sync.Mutex
	// followers is replaced, never changed in place, on attach and detach,
	// so publishing takes it under the lock without copying per event.
	followers []*follower
	refs      int
	recent    []Msg // contiguous in seq, oldest first
	warm      bool  // a follower got a snapshot here: worth lingering for
	unsub     func() error
	idle      *time.Timer
}

// attach adds f to its task's topic, subscribing upstream first when this is
// the topic's first follower. When attach returns, every event published
// from then on reaches f.
func (h *hub) attach(f *follower) error {
	h.mu.Lock()
	t, ok := h.topics[f.taskID]
	if !ok {
		t = &topic{id: f.taskID, ready: make(chan struct{})}
		h.topics[f.taskID] = t
	}
	t.mu.Lock()
	t.refs++
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
	t.mu.Unlock()
	h.mu.Unlock()

	if !ok {
		unsub, err := h.bus.SubscribeTask(f.taskID, t.publish(h))
		t.mu.Lock()
		t.unsub, t.err = unsub, err
		t.mu.Unlock()
		close(t.ready)
		if err == nil {
			h.metrics.upstream.Inc()
		}
	}
	<-t.ready
	if t.err != nil {
		h.release(t)
		return fmt.Errorf("follow task %s: %w", f.taskID, t.err)
	}
	t.mu.Lock()
	t.followers = append(slices.Clip(t.followers), f)
	t.mu.Unlock()
	f.topic = t
	h.metrics.subscriptions.Inc()
	return nil
}

// detach removes f; the upstream subscription ends after the linger period
// if no follower came back. A follower that never got a snapshot (a missing
// or foreign task, a refused submit) leaves no lingering subscription.
func (h *hub) detach(f *follower) {
	t := f.topic
	if t == nil {
		return
	}
	t.mu.Lock()
	i := slices.Index(t.followers, f)
	was := i >= 0
	if was {
		t.followers = slices.Delete(slices.Clone(t.followers), i, i+1)
	}
	t.warm = t.warm || f.started.Load()
	t.mu.Unlock()
	if was {
		h.metrics.subscriptions.Dec()
	}
	h.release(t)
}

func (h *hub) release(t *topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refs--
	if t.refs > 0 {
		return
	}
	if t.err != nil || h.linger <= 0 || !t.warm {
		h.closeTopicLocked(t)
		return
	}
	t.idle = time.AfterFunc(h.linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.refs == 0 && h.topics[t.id] == t {
			h.closeTopicLocked(t)
		}
	})
}

// closeTopicLocked ends the upstream subscription; h.mu and t.mu are held.
func (h *hub) closeTopicLocked(t *topic) {
	if h.topics[t.id] == t {
		delete(h.topics, t.id)
	}
	if t.unsub != nil {
		if err := t.unsub(); err != nil {
			h.log.Debug("unsubscribe task", "task_id", t.id, "err", err)
		}
		t.unsub = nil
		h.metrics.upstream.Dec()
	}
}

// close ends every upstream subscription (gateway shutdown).
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.topics {
		t.mu.Lock()
		if t.idle != nil {
			t.idle.Stop()
		}
		h.closeTopicLocked(t)
		t.mu.Unlock()
	}
}

// publish returns the upstream callback: it records the event in the recent
// buffer and hands it to every follower, in the order NATS delivers.
func (t *topic) publish(h *hub) func(Msg) {
	return func(m Msg) {
		t.mu.Lock()
		t.remember(m, h.recent)
		fs := t.followers
		t.mu.Unlock()
		for _, f := range fs {
			f.onLive(m)
		}
		h.metrics.fannedOut.Add(float64(len(fs)))
	}
}

// remember appends m to the recent buffer, keeping it contiguous: an event
// that does not follow the last one starts the buffer afresh.
func (t *topic) remember(m Msg, max int) {
	if n := len(t.recent); n > 0 {
		last := t.recent[n-1].Event.Seq
		if m.Event.Seq <= last {
			return
		}
		if m.Event.Seq != last+1 {
			t.recent = t.recent[:0]
		}
	}
	t.recent = append(t.recent, m)
	if len(t.recent) > max {
		// Copy down rather than reslice so the backing array does not grow forever.
		n := copy(t.recent, t.recent[len(t.recent)-max/2:])
		t.recent = t.recent[:n]
	}
}

// after returns the remembered events with seq > seq. ok is false when the
// buffer does not reach back to seq, so the caller must read the log.
func (t *topic) after(seq int64) (msgs []Msg, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.recent)
	if n == 0 || t.recent[0].Event.Seq > seq+1 || t.recent[n-1].Event.Seq < seq {
		return nil, false
	}
	i := int(seq + 1 - t.recent[0].Event.Seq)
	return append([]Msg(nil), t.recent[i:]...), true
}
