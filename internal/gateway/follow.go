package gateway

import (
	"context"
	"slices"
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
	sendEvent(m task.Msg) bool
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

	// ctx is its owner's (the tab's, the SSE request's): a follower makes
	// no context of its own, which would cost every subscription a done
	// channel and a map in its parent. A catch-up under way when the
	// follower stops finishes its read (bounded) and delivers nothing.
	ctx context.Context

	detach sync.Once
	// started: the follower delivered a snapshot or resumed, so its task is
	// worth keeping warm after it leaves.
	started atomic.Bool
	// attached: the hub counts it among the topic's followers.
	attached bool
	// stopped is set first thing by stop, so a batch being delivered ends.
	stopped atomic.Bool

	// sendMu is held while the catch-up delivers (a snapshot, a batch of
	// buffered or logged events). The catch-up takes a batch out of the
	// buffer under mu and delivers it under sendMu alone, so the live feed,
	// which only buffers while the follower catches up, never waits for a
	// batch; stop takes sendMu, so nothing is delivered after it returns.
	sendMu sync.Mutex

	mu      sync.Mutex
	done    bool
	filling bool
	// reprobe asks a running catch-up to look in the log once more before
	// it ends (the connection came back while it ran).
	reprobe bool
	// waiting is set while a catch-up waits (on a log read, which can take
	// seconds while a NATS stream elects a leader, or before it reads
	// again) and delivers nothing. Meanwhile the live feed delivers what
	// continues f.last itself: the event that arrives, and the buffered
	// ones it joins up with. A runner publishes again what a leaderless
	// stream dropped, so the live copy often closes a gap seconds before
	// the log can.
	waiting bool
	last    task.Position
	pos     uint64
	// reach, when set, is a position the first catch-up must get to (a
	// snapshot the follower resumed before without sending it); if the
	// recent events and the log do not get there, the snapshot is sent.
	reach task.Position
	buf   []task.Msg
	// bufBytes is the size of buf's events, bounded by the hub's maxBuffer.
	bufBytes int
}

// Limits of the catch-up: how many live events a follower buffers while it
// reads the log, how long it waits for the log to hold an event it has seen
// live before it gives up and resyncs from a snapshot (about 3 s: after a
// NATS node or cluster comes back, a runner publishes again what the log
// dropped a second or two after it was sent live), and how it retries a log
// read that failed.
const (
	catchUpBatch    = 256
	maxFollowBuffer = 1 << 16
	fillRetries     = 16
	fillRetryDelay  = 25 * time.Millisecond
	maxFillDelay    = 250 * time.Millisecond
	// maxReorder bounds how far back among the buffered events of its
	// attempt a late live event is put in its place; one further back waits
	// for the log.
	maxReorder = 1024
	// A log read that failed (NATS away or without a stream leader) is
	// tried again after a growing wait, for about a minute; then a gap is
	// closed by a snapshot.
	readRetryDelay    = 250 * time.Millisecond
	maxReadRetryDelay = time.Second
	maxReadFailures   = 40
)

func newFollower(ctx context.Context, h *hub, taskID string, s sink, snapshot func(context.Context) (task.Task, error)) *follower {
	return &follower{hub: h, taskID: taskID, sink: s, snapshot: snapshot, ctx: ctx, filling: true}
}

// origin says where the events after a follower's first snapshot can be.
type origin bool

const (
	// existingTask: some may have been published before the follower was
	// attached, so the catch-up looks in the log.
	existingTask origin = true
	// createdAfterAttach: the task was created once the follower was
	// attached, so every event of it comes on the live feed.
	createdAfterAttach origin = false
)

// start delivers the first snapshot (with its reply) and catches up. The
// follower must already be attached.
func (f *follower) start(t task.Task, reply []byte, from origin) {
	f.sendMu.Lock()
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		f.sendMu.Unlock()
		return
	}
	f.started.Store(true)
	f.last, f.pos = task.PositionOf(t), t.StreamPos
	f.mu.Unlock()
	ok := f.sink.sendSnapshot(t, reply)
	f.sendMu.Unlock()
	if !ok {
		f.finish()
		return
	}
	f.catchUp(bool(from))
}

// startAt continues after last without a snapshot (SSE Last-Event-ID):
// first the logged events already read after it, then the usual catch-up,
// which must get at least to reach (the snapshot the resume stands in for)
// or sends that snapshot.
func (f *follower) startAt(last task.Position, logged []task.Msg, reach task.Position) {
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return
	}
	f.started.Store(true)
	f.last, f.pos, f.reach = last, 0, reach
	f.mu.Unlock()
	f.deliverBatches(logged)
	f.catchUp(true)
}

// spawn runs fn (a start or a catch-up) in a goroutine the hub counts, so
// the gateway's Shutdown waits for it.
func (f *follower) spawn(fn func()) {
	f.hub.work.Add(1)
	go func() {
		defer f.hub.work.Done()
		fn()
	}()
}

// stop detaches the follower; nothing is delivered after it returns.
func (f *follower) stop() {
	f.stopped.Store(true)
	f.finish()
	// Wait for a batch being delivered.
	f.sendMu.Lock()
	f.sendMu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
	f.detach.Do(func() { f.hub.detach(f) })
}

// finish marks the follower done: it delivers nothing more.
func (f *follower) finish() {
	f.mu.Lock()
	f.done = true
	f.buf, f.bufBytes = nil, 0
	f.mu.Unlock()
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
		f.spawn(func() { f.catchUp(true) })
	}
}

// onLive receives an event from the topic, in upstream order. It only
// buffers while the follower catches up, and otherwise hands the event to
// the sink (a push onto a queue, which never blocks).
func (f *follower) onLive(m task.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	if f.waiting && len(f.buf) == 0 && f.last.Step(m.Event) != task.StepGap {
		f.sendLiveLocked(m)
		return
	}
	if f.filling {
		f.bufferLocked(m)
		if f.waiting {
			f.passBufferedLocked()
		}
		return
	}
	if f.last.Step(m.Event) == task.StepGap {
		f.hub.metrics.gaps.Inc()
		f.filling = true
		f.buf, f.bufBytes = append(f.buf[:0], m), len(m.Data)
		f.spawn(func() { f.catchUp(false) })
		return
	}
	f.sendLiveLocked(m)
}

// bufferLocked keeps a live event while the follower catches up. Events
// come in the order the runner sent them, but for one case: a runner that
// publishes again what a stream without a leader dropped sends those events
// after later ones. Such an event is put back in its place (among the last
// maxReorder of its attempt), so it closes the gap it left; a repeat is
// dropped.
func (f *follower) bufferLocked(m task.Msg) {
	if len(f.buf) >= maxFollowBuffer || f.bufBytes+len(m.Data) > f.hub.maxBuffer {
		// Far behind: drop the buffer; the catch-up resyncs.
		f.hub.metrics.limitRefusals.WithLabelValues(limitFollowBuffer).Inc()
		f.buf, f.bufBytes = f.buf[:0], 0
	}
	at := len(f.buf)
	for at > 0 && len(f.buf)-at < maxReorder {
		prev := f.buf[at-1].Event
		if prev.Attempt != m.Event.Attempt || prev.Seq < m.Event.Seq {
			break
		}
		if prev.Seq == m.Event.Seq {
			return
		}
		at--
	}
	f.buf = slices.Insert(f.buf, at, m)
	f.bufBytes += len(m.Data)
}

// passBufferedLocked delivers, while the catch-up waits, the buffered events
// that continue f.last, up to catchUpBatch at a time (the catch-up delivers
// the rest between reads, with room in the sink). f.mu is held.
func (f *follower) passBufferedLocked() {
	batch, used, _ := nextBatch(f.buf, f.last)
	for _, m := range batch {
		f.sendLiveLocked(m)
		if f.done {
			return
		}
	}
	for _, m := range f.buf[:used] {
		f.bufBytes -= len(m.Data)
	}
	n := copy(f.buf, f.buf[used:])
	clear(f.buf[n:])
	f.buf = f.buf[:n]
}

// sendLiveLocked hands a live event that is not a gap to the sink: the next
// one (or a newer attempt's start) is delivered, a repeat or a stale event
// dropped. f.mu is held, and no batch is being delivered.
func (f *follower) sendLiveLocked(m task.Msg) {
	switch f.last.Step(m.Event) {
	case task.StepStale:
		f.hub.metrics.stale.Inc()
	case task.StepNext, task.StepStart:
		if !f.sink.sendEvent(m) {
			f.done = true
			f.buf, f.bufBytes = nil, 0
			return
		}
		f.last = positionOf(m)
		if m.StreamPos > 0 {
			f.pos = m.StreamPos
		}
	}
}

// nextBatch picks, from msgs, the events that continue from at, up to
// catchUpBatch of them: repeats and stale events are passed over, a gap
// stops it. It returns them, how many of msgs it consumed, and whether it
// stopped at a gap. f.mu is held.
func nextBatch(msgs []task.Msg, at task.Position) (batch []task.Msg, used int, gap bool) {
	for used < len(msgs) && len(batch) < catchUpBatch {
		m := msgs[used]
		switch at.Step(m.Event) {
		case task.StepGap:
			return batch, used, true
		case task.StepNext, task.StepStart:
			batch = append(batch, m)
			at = positionOf(m)
		}
		used++
	}
	return batch, used, false
}

// deliver hands a batch to the sink under sendMu and moves f.last past it.
// It reports false when the follower is done.
func (f *follower) deliver(batch []task.Msg) bool {
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	var pos uint64
	for _, m := range batch {
		if f.stopped.Load() || !f.sink.sendEvent(m) {
			f.finish()
			return false
		}
		if m.StreamPos > 0 {
			pos = m.StreamPos
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(batch) > 0 {
		f.last = positionOf(batch[len(batch)-1])
	}
	if pos > 0 {
		f.pos = pos
	}
	return !f.done
}

// drain delivers the buffered events that continue f.last, a batch at a
// time (waiting for the sink to drain in between), and reports whether a
// gap remains before the rest of the buffer; ok is false when the follower
// is done.
func (f *follower) drain() (gap, ok bool) {
	for {
		f.mu.Lock()
		if f.done {
			f.mu.Unlock()
			return false, false
		}
		batch, used, gap := nextBatch(f.buf, f.last)
		for _, m := range f.buf[:used] {
			f.bufBytes -= len(m.Data)
		}
		n := copy(f.buf, f.buf[used:])
		clear(f.buf[n:])
		f.buf = f.buf[:n]
		more := len(f.buf) > 0 && !gap
		f.mu.Unlock()
		if len(batch) > 0 && !f.deliver(batch) {
			return false, false
		}
		if !more {
			return gap, true
		}
		f.sink.waitRoom(f.ctx)
	}
}

// deliverBatches hands msgs that continue f.last to the sink, a batch at a
// time, waiting for the sink to drain in between; it stops at a gap.
func (f *follower) deliverBatches(msgs []task.Msg) {
	for len(msgs) > 0 {
		f.sink.waitRoom(f.ctx)
		f.mu.Lock()
		if f.done {
			f.mu.Unlock()
			return
		}
		batch, used, gap := nextBatch(msgs, f.last)
		f.mu.Unlock()
		if len(batch) > 0 && !f.deliver(batch) {
			return
		}
		if gap {
			return
		}
		msgs = msgs[used:]
	}
}

// catchUp closes the distance between f.last and the live feed. probe asks
// it to look for events after f.last even with nothing buffered (right after
// a snapshot, events published before the follower attached may exist).
func (f *follower) catchUp(probe bool) {
	misses, readFailures := 0, 0
	for {
		gap, ok := f.drain()
		if !ok {
			return
		}
		f.mu.Lock()
		if f.done {
			f.mu.Unlock()
			return
		}
		if f.reprobe {
			f.reprobe, probe = false, true
		}
		if !gap && !probe {
			if len(f.buf) > 0 {
				// Buffered while the last batch was delivered.
				f.mu.Unlock()
				continue
			}
			f.filling = false
			f.mu.Unlock()
			return
		}
		last, pos := f.last, f.pos
		f.mu.Unlock()
		if misses == 1 {
			// A publish retried after a stream lost its leader can be
			// stored after events that came after it, so events past last
			// can sit below pos: read the task's whole log once before
			// waiting for it to store them.
			pos = 0
		}

		var readErr error
		msgs, ok := f.topic.after(last)
		if !ok {
			f.mu.Lock()
			if !gap && len(f.buf) > 0 {
				// Came in since the drain: deliver it before the read.
				f.mu.Unlock()
				continue
			}
			// Live events may pass while the read runs.
			f.waiting = true
			f.mu.Unlock()
			msgs, readErr = f.hub.bus.ReadLog(f.ctx, f.taskID, last, pos)
			if readErr != nil && f.ctx.Err() == nil && (readFailures == 0 || readFailures == maxReadFailures) {
				// Once a streak, not every retry of every tab.
				f.hub.log.Warn("read task log", "task_id", f.taskID, "after_seq", last,
					"failures", readFailures+1, "err", readErr)
			}
			f.hub.metrics.logReads.Inc()
			if readErr != nil && f.ctx.Err() == nil {
				f.hub.metrics.logReadErrs.Inc()
			}
			if readErr != nil && f.ctx.Err() == nil && readFailures < maxReadFailures {
				// NATS away, or its stream without a leader: read again
				// soon. A look must still be taken (events the live feed
				// missed may be there, with none after them to show it),
				// and live events go on passing meanwhile; a gap waits for
				// the log (or a live copy) rather than for a snapshot
				// Postgres may not have caught up with either.
				readFailures++
				if !f.waitFor(min(readRetryDelay*time.Duration(readFailures), maxReadRetryDelay)) {
					return
				}
				continue
			}
			readFailures = 0
			f.mu.Lock()
			f.waiting = false
			f.mu.Unlock()
		}
		probe = false

		f.deliverBatches(msgs)
		f.mu.Lock()
		progressed := last.Before(f.last)
		stillGap := len(f.buf) > 0 && f.last.Step(f.buf[0].Event) == task.StepGap
		short := f.last.Before(f.reach)
		f.reach = task.Position{}
		f.mu.Unlock()
		if short {
			// The resume cannot be served from memory or the log.
			if !f.resync() {
				return
			}
			probe, misses = true, 0
			continue
		}

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
		f.mu.Lock()
		f.waiting = true
		f.mu.Unlock()
		if !f.waitFor(min(fillRetryDelay*time.Duration(misses), maxFillDelay)) {
			return
		}
	}
}

// waitFor sleeps d while the live feed may deliver (f.waiting is set), and
// reports false if the follower stopped meanwhile.
func (f *follower) waitFor(d time.Duration) bool {
	ok := f.sleep(d)
	f.mu.Lock()
	f.waiting = false
	f.mu.Unlock()
	return ok
}

// sleep waits d, and reports false if the follower stopped meanwhile.
func (f *follower) sleep(d time.Duration) bool {
	if f.stopped.Load() {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
		return false
	case <-t.C:
		return !f.stopped.Load()
	}
}

// resync sends a fresh snapshot in place of events that cannot be found.
func (f *follower) resync() bool {
	f.hub.metrics.resyncs.Inc()
	t, err := f.snapshot(f.ctx)
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	f.mu.Lock()
	if err != nil || f.done {
		if err != nil && f.ctx.Err() == nil {
			f.hub.log.Warn("resync snapshot", "task_id", f.taskID, "err", err)
		}
		f.done = true
		f.mu.Unlock()
		return false
	}
	f.last, f.pos = task.PositionOf(t), t.StreamPos
	f.mu.Unlock()
	if f.stopped.Load() || !f.sink.sendSnapshot(t, nil) {
		f.finish()
		return false
	}
	return true
}
