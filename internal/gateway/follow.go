package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// sink is where a follower delivers: a WebSocket tab or an SSE stream. Both
// methods must not block; they report false when the sink is gone.
type sink interface {
	// sendSnapshot delivers a snapshot; reply is the encoded direct reply
	// (submitted or snapshot) or nil for an unsolicited resync snapshot.
	sendSnapshot(t task.Task, reply []byte) bool
	sendEvent(m Msg) bool
	// waitRoom blocks until the sink has taken most of what is queued (or ctx
	// ends). A catch-up waits on it between batches, so replaying a long log
	// to a tab that reads is never mistaken for a tab that does not.
	waitRoom(ctx context.Context)
}

// follower implements the resume rule of DESIGN.md for one sink following
// one task: it is attached to the live feed before the snapshot is read, it
// buffers live events while it catches up from the topic's recent events or
// the log, and from then on passes each event exactly once and in order.
// Events are ordered by (attempt, seq) with task.Position.Step: anything at
// or below the last delivered position is dropped, and so is every event of
// an attempt older than the last delivered one (a runner fenced out by a
// lease expiry that woke up). A gap is closed from the log, and if the log
// cannot close it, by a fresh snapshot — never by a silent skip.
type follower struct {
	hub    *hub
	topic  *topic
	taskID string
	sink   sink
	// snapshot reads the task afresh, for a resync.
	snapshot func(ctx context.Context) (task.Task, error)

	ctx    context.Context
	cancel context.CancelFunc

	detach sync.Once
	// started: the follower delivered a snapshot or resumed, so its task is
	// worth keeping warm after it leaves.
	started atomic.Bool

	mu      sync.Mutex
	done    bool
	filling bool
	// reprobe asks a running catch-up to look in the log once more before
	// it ends (the connection came back while it ran).
	reprobe bool
	last    task.Position
	pos     uint64
	buf     []Msg
	// bufBytes is the size of buf's events, bounded by the hub's maxBuffer.
	bufBytes int
}

// Limits of the catch-up: how many live events a follower buffers while it
// reads the log, and how long it waits for the log to hold an event it has
// seen live before it gives up and resyncs from a snapshot.
const (
	catchUpBatch    = 256
	maxFollowBuffer = 1 << 16
	fillRetries     = 8
	fillRetryDelay  = 25 * time.Millisecond
)

func newFollower(ctx context.Context, h *hub, taskID string, s sink, snapshot func(context.Context) (task.Task, error)) *follower {
	ctx, cancel := context.WithCancel(ctx)
	return &follower{hub: h, taskID: taskID, sink: s, snapshot: snapshot, ctx: ctx, cancel: cancel, filling: true}
}

// start delivers the first snapshot (with its reply) and catches up. The
// follower must already be attached.
func (f *follower) start(t task.Task, reply []byte) {
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return
	}
	f.started.Store(true)
	f.last, f.pos = task.PositionOf(t), t.StreamPos
	if !f.sink.sendSnapshot(t, reply) {
		f.done = true
	}
	f.mu.Unlock()
	f.catchUp(true)
}

// startAt continues after last without a snapshot (SSE Last-Event-ID):
// first the logged events already read after it, then the usual catch-up.
func (f *follower) startAt(last task.Position, logged []Msg) {
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return
	}
	f.started.Store(true)
	f.last, f.pos = last, 0
	f.mu.Unlock()
	f.deliverBatches(logged)
	f.catchUp(true)
}

// stop detaches the follower; nothing is delivered after it returns.
func (f *follower) stop() {
	f.mu.Lock()
	f.done = true
	f.buf, f.bufBytes = nil, 0
	f.mu.Unlock()
	f.cancel()
	f.detach.Do(func() { f.hub.detach(f) })
}

// probe looks in the log for events after the last delivered one, even
// though no live event showed a gap: the live feed may have missed them.
func (f *follower) probe() {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.done:
	case f.filling:
		f.reprobe = true
	default:
		f.filling = true
		go f.catchUp(true)
	}
}

// onLive receives an event from the topic, in upstream order.
func (f *follower) onLive(m Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	if f.filling {
		if len(f.buf) >= maxFollowBuffer || f.bufBytes+len(m.Data) > f.hub.maxBuffer {
			// Far behind: drop the buffer; the catch-up resyncs.
			f.hub.metrics.limitRefusals.WithLabelValues(limitFollowBuffer).Inc()
			f.buf, f.bufBytes = f.buf[:0], 0
		}
		f.buf = append(f.buf, m)
		f.bufBytes += len(m.Data)
		return
	}
	switch f.last.Step(m.Event) {
	case task.StepStale:
		f.hub.metrics.stale.Inc()
	case task.StepRepeat:
	case task.StepNext, task.StepStart:
		f.deliverLocked(m)
	default:
		f.hub.metrics.gaps.Inc()
		f.filling = true
		f.buf, f.bufBytes = append(f.buf[:0], m), len(m.Data)
		go f.catchUp(false)
	}
}

func (f *follower) deliverLocked(m Msg) {
	if !f.sink.sendEvent(m) {
		f.done = true
		f.buf, f.bufBytes = nil, 0
		return
	}
	f.last = task.Position{Attempt: m.Event.Attempt, Seq: m.Event.Seq}
	if m.StreamPos > 0 {
		f.pos = m.StreamPos
	}
}

// drain delivers the buffered events that continue f.last, a batch at a
// time, and reports whether a gap remains before the rest of the buffer.
// f.mu is held on entry and on return; it is let go while the sink drains.
func (f *follower) drain() (gap bool) {
	for !f.done {
		i, n := 0, 0
		for ; i < len(f.buf) && n < catchUpBatch && !f.done; i++ {
			m := f.buf[i]
			step := f.last.Step(m.Event)
			if step == task.StepGap {
				break
			}
			if step == task.StepNext || step == task.StepStart {
				f.deliverLocked(m)
				n++
			}
		}
		if f.done {
			return false
		}
		for _, m := range f.buf[:i] {
			f.bufBytes -= len(m.Data)
		}
		f.buf = append(f.buf[:0], f.buf[i:]...)
		if len(f.buf) == 0 || f.last.Step(f.buf[0].Event) == task.StepGap {
			return len(f.buf) > 0
		}
		f.mu.Unlock()
		f.sink.waitRoom(f.ctx)
		f.mu.Lock()
	}
	return false
}

// deliverBatches hands msgs that continue f.last to the sink, a batch at a
// time, waiting for the sink to drain in between; it stops at a gap.
func (f *follower) deliverBatches(msgs []Msg) {
	for len(msgs) > 0 {
		f.sink.waitRoom(f.ctx)
		f.mu.Lock()
		n := min(len(msgs), catchUpBatch)
		for _, m := range msgs[:n] {
			if f.done {
				f.mu.Unlock()
				return
			}
			switch f.last.Step(m.Event) {
			case task.StepGap:
				f.mu.Unlock()
				return
			case task.StepNext, task.StepStart:
				f.deliverLocked(m)
			}
		}
		f.mu.Unlock()
		msgs = msgs[n:]
	}
}

// catchUp closes the distance between f.last and the live feed. probe asks
// it to look for events after f.last even with nothing buffered (right after
// a snapshot, events published before the follower attached may exist).
func (f *follower) catchUp(probe bool) {
	misses := 0
	for {
		f.mu.Lock()
		if f.done {
			f.mu.Unlock()
			return
		}
		gap := f.drain()
		if f.done {
			f.mu.Unlock()
			return
		}
		if f.reprobe {
			f.reprobe, probe = false, true
		}
		if !gap && !probe {
			f.filling = false
			f.mu.Unlock()
			return
		}
		last, pos := f.last, f.pos
		f.mu.Unlock()

		msgs, ok := f.topic.after(last)
		if !ok {
			var err error
			msgs, err = f.hub.bus.ReadLog(f.ctx, f.taskID, last, pos)
			if err != nil && f.ctx.Err() == nil {
				f.hub.log.Warn("read task log", "task_id", f.taskID, "after_seq", last, "err", err)
			}
			f.hub.metrics.logReads.Inc()
		}
		probe = false

		f.deliverBatches(msgs)
		f.mu.Lock()
		progressed := last.Before(f.last)
		stillGap := len(f.buf) > 0 && f.last.Step(f.buf[0].Event) == task.StepGap
		f.mu.Unlock()

		if !stillGap || progressed {
			misses = 0
			continue
		}
		// The log has not (yet) stored what the live feed already showed.
		misses++
		if misses > fillRetries {
			if !f.resync() {
				return
			}
			probe, misses = true, 0
			continue
		}
		select {
		case <-f.ctx.Done():
			return
		case <-time.After(fillRetryDelay * time.Duration(misses)):
		}
	}
}

// resync sends a fresh snapshot in place of events that cannot be found.
func (f *follower) resync() bool {
	f.hub.metrics.resyncs.Inc()
	t, err := f.snapshot(f.ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil || f.done {
		if err != nil && f.ctx.Err() == nil {
			f.hub.log.Warn("resync snapshot", "task_id", f.taskID, "err", err)
		}
		f.done = true
		return false
	}
	f.last, f.pos = task.PositionOf(t), t.StreamPos
	if !f.sink.sendSnapshot(t, nil) {
		f.done = true
		return false
	}
	return true
}
