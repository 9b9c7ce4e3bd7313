package gateway

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tether-dev/tether/internal/task"
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
	// maxBuffer bounds, in bytes, the live events a follower buffers while
	// it catches up; past it the buffer is dropped and the follower resyncs.
	maxBuffer int

	mu     sync.Mutex
	topics map[string]*topic

	// work counts the followers' goroutines (starts and catch-ups), for
	// Shutdown to wait on once every tab and stream is gone.
	work sync.WaitGroup
}

func newHub(bus Bus, log *slog.Logger, m *metrics, recent int, linger time.Duration, maxBuffer int) *hub {
	return &hub{bus: bus, log: log, metrics: m, recent: recent, linger: linger, maxBuffer: maxBuffer, topics: map[string]*topic{}}
}

type topic struct {
	id string
	// subscribing is held (Add(1)) by the first follower while it sets up
	// the upstream subscription; the others Wait on it. A WaitGroup lives in
	// the topic, where a channel to close would be an allocation of its own
	// for every followed task.
	subscribing sync.WaitGroup
	err         error // set before subscribing is done when it failed

	mu sync.Mutex
	// followers is read by publish without the lock: publish takes the
	// slice under it and walks it outside. So its elements are never
	// changed in place: attach appends (past the length any reader holds;
	// a full array is copied by append, once per doubling), detach only
	// counts a leaver in gone, and once leavers are half of the slice it is
	// rebuilt without them into a new array. Joins and leaves of many tabs
	// cost amortised O(1) each, not a copy of every follower.
	followers []*follower
	gone      int
	refs      int
	recent    []task.Msg // contiguous in seq, oldest first
	recentLen int        // bytes of recent's events, at most the hub's maxBuffer
	warm      bool       // a follower got a snapshot here: worth lingering for
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
		t = &topic{id: f.taskID}
		t.subscribing.Add(1)
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
		unsub, err := h.bus.SubscribeTask(f.taskID, t.publish(h), t.lost)
		t.mu.Lock()
		t.unsub, t.err = unsub, err
		t.mu.Unlock()
		t.subscribing.Done()
		if err == nil {
			h.metrics.upstream.Inc()
		}
	}
	t.subscribing.Wait()
	if t.err != nil {
		h.release(t)
		return fmt.Errorf("follow task %s: %w", f.taskID, t.err)
	}
	t.mu.Lock()
	t.followers = append(t.followers, f)
	f.attached = true
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
	was := f.attached
	if was {
		f.attached = false
		// f delivers nothing more (it is stopped); publish passes over it
		// until the next rebuild.
		t.gone++
		if t.gone*2 > len(t.followers) {
			live := make([]*follower, 0, len(t.followers)-t.gone)
			for _, g := range t.followers {
				if g.attached {
					live = append(live, g)
				}
			}
			t.followers, t.gone = live, 0
		}
	}
	t.warm = t.warm || f.started.Load()
	t.mu.Unlock()
	if was {
		h.metrics.subscriptions.Dec()
	}
	h.release(t)
}

// release drops a reference to t. The last one ends the upstream
// subscription, now or after the linger period; the unsubscribe itself, a
// write to the NATS connection, runs after the locks are let go, so no
// attach, detach or delivery waits on a socket.
func (h *hub) release(t *topic) {
	h.mu.Lock()
	t.mu.Lock()
	t.refs--
	var unsub func() error
	switch {
	case t.refs > 0:
	case t.err != nil || h.linger <= 0 || !t.warm:
		unsub = h.closeTopicLocked(t)
	default:
		t.idle = time.AfterFunc(h.linger, func() { h.expire(t) })
	}
	t.mu.Unlock()
	h.mu.Unlock()
	h.unsubscribe(t, unsub)
}

// expire ends t's lingering subscription unless a follower came back.
func (h *hub) expire(t *topic) {
	var unsub func() error
	h.mu.Lock()
	t.mu.Lock()
	if t.refs == 0 && h.topics[t.id] == t {
		unsub = h.closeTopicLocked(t)
	}
	t.mu.Unlock()
	h.mu.Unlock()
	h.unsubscribe(t, unsub)
}

// closeTopicLocked takes t out of the hub and returns its upstream
// unsubscribe (nil when it has none) for the caller to run once it has let
// go of h.mu and t.mu, which it holds. A follower arriving meanwhile makes a
// topic and subscription of its own, so the two never meet.
func (h *hub) closeTopicLocked(t *topic) (unsub func() error) {
	if h.topics[t.id] == t {
		delete(h.topics, t.id)
	}
	unsub, t.unsub = t.unsub, nil
	return unsub
}

// unsubscribe runs a closed topic's unsubscribe, with no lock held.
func (h *hub) unsubscribe(t *topic, unsub func() error) {
	if unsub == nil {
		return
	}
	if err := unsub(); err != nil {
		h.log.Debug("unsubscribe task", "task_id", t.id, "err", err)
	}
	h.metrics.upstream.Dec()
}

// close ends every upstream subscription (gateway shutdown).
func (h *hub) close() {
	h.mu.Lock()
	closed := make(map[*topic]func() error, len(h.topics))
	for _, t := range h.topics {
		t.mu.Lock()
		if t.idle != nil {
			t.idle.Stop()
		}
		closed[t] = h.closeTopicLocked(t)
		t.mu.Unlock()
	}
	h.mu.Unlock()
	for t, unsub := range closed {
		h.unsubscribe(t, unsub)
	}
}

// catchUpAll has every follower look for events it missed in the log: the
// connection to NATS came back, and whatever was published while it was
// away never reached the live feed. Without it a task that ended during the
// outage would look stuck, since no later event would reveal the gap.
func (h *hub) catchUpAll() {
	h.mu.Lock()
	topics := make([]*topic, 0, len(h.topics))
	for _, t := range h.topics {
		topics = append(topics, t)
	}
	h.mu.Unlock()
	for _, t := range topics {
		t.mu.Lock()
		// The recent events stop where the connection was lost: a follower
		// must not take them for the whole story and skip the log.
		t.recent, t.recentLen = t.recent[:0], 0
		fs := t.followers
		t.mu.Unlock()
		for _, f := range fs {
			f.probe()
		}
	}
}

// publish returns the upstream callback: it records the event in the recent
// buffer and hands it to every follower, in the order NATS delivers.
func (t *topic) publish(h *hub) func(task.Msg) {
	return func(m task.Msg) {
		t.mu.Lock()
		t.remember(m, h.recent, h.maxBuffer)
		fs, gone := t.followers, t.gone
		t.mu.Unlock()
		for _, f := range fs {
			f.onLive(m)
		}
		h.metrics.fannedOut.Add(float64(len(fs) - gone))
	}
}

// lost is told when live events of the topic were dropped before they
// reached it: the recent buffer may now end early without a gap to show
// it, so it is emptied, and every follower looks in the log.
func (t *topic) lost() {
	t.mu.Lock()
	t.recent, t.recentLen = t.recent[:0], 0
	fs := t.followers
	t.mu.Unlock()
	for _, f := range fs {
		f.probe()
	}
}

// remember appends m to the recent buffer, keeping it contiguous in the
// (attempt, seq) order of task.Position.Step: a repeat or a fenced-out
// runner's stale event is not kept, and an event that does not continue the
// last one starts the buffer afresh.
func (t *topic) remember(m task.Msg, max, maxBytes int) {
	if n := len(t.recent); n > 0 {
		switch positionOf(t.recent[n-1]).Step(m.Event) {
		case task.StepStale, task.StepRepeat:
			return
		case task.StepGap:
			t.recent, t.recentLen = t.recent[:0], 0
		}
	}
	t.recent = append(t.recent, m)
	t.recentLen += len(m.Data)
	if len(t.recent) > max || t.recentLen > maxBytes {
		// Keep the newer half, in count and in bytes. Copy down rather than
		// reslice so the backing array does not grow forever.
		keep, kept := min(len(t.recent), max/2), 0
		for _, m := range t.recent[len(t.recent)-keep:] {
			kept += len(m.Data)
		}
		for keep > 1 && kept > maxBytes/2 {
			kept -= len(t.recent[len(t.recent)-keep].Data)
			keep--
		}
		n := copy(t.recent, t.recent[len(t.recent)-keep:])
		t.recent, t.recentLen = t.recent[:n], kept
	}
}

// after returns the remembered events that follow the position p. ok is
// false when the buffer does not reach back to p, so the caller must read
// the log.
func (t *topic) after(p task.Position) (msgs []task.Msg, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.recent) - 1; i >= 0; i-- {
		if positionOf(t.recent[i]) == p {
			return append([]task.Msg(nil), t.recent[i+1:]...), true
		}
	}
	if len(t.recent) > 0 {
		if step := p.Step(t.recent[0].Event); step == task.StepNext || step == task.StepStart {
			return append([]task.Msg(nil), t.recent...), true
		}
	}
	return nil, false
}

func positionOf(m task.Msg) task.Position {
	return task.Position{Attempt: m.Event.Attempt, Seq: m.Event.Seq}
}
