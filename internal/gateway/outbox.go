package gateway

import (
	"context"
	"sync"
)

// outbox is a connection's bounded queue of outgoing messages. Producers
// (the hub, request handlers) never block on it: when a tab is too slow to
// take its events and the queue passes its byte limit, the outbox is marked
// overflowed and the connection is closed (1013) so the client resyncs from a
// snapshot, instead of buffering without bound.
//
// A writer takes what is queued in one of two ways. With spawn set (a
// WebSocket tab), the outbox starts a writer goroutine when messages arrive
// and none runs, and the writer ends when it finds the queue empty (next),
// so an idle tab has no writer goroutine at all. Without it (an SSE stream,
// whose handler goroutine writes), wake is signalled and the owner calls take.
type outbox struct {
	mu       sync.Mutex
	items    [][]byte
	bytes    int
	limit    int
	closed   bool
	overflow bool
	// wake is signalled when messages arrive; only without spawn.
	wake chan struct{}
	// taken is signalled each time the writer takes the queue.
	taken chan struct{}
	// onOverflow runs once, outside the lock, when the limit is passed.
	onOverflow func()

	// spawn starts a writer; it is called with mu held and must only
	// start a goroutine (and count it).
	spawn    func()
	ready    bool // the connection is up: spawn may be called
	writing  bool // a writer runs
	draining bool
	// flushed is closed when, draining, the queue is empty and no writer
	// runs; only with spawn.
	flushed     chan struct{}
	flushedDone bool
}

func newOutbox(limit int, onOverflow func()) *outbox {
	return &outbox{limit: limit, wake: make(chan struct{}, 1), taken: make(chan struct{}, 1), onOverflow: onOverflow}
}

// newSpawningOutbox is an outbox whose writer goroutine spawn starts on
// demand.
func newSpawningOutbox(limit int, onOverflow, spawn func()) *outbox {
	return &outbox{limit: limit, taken: make(chan struct{}, 1), onOverflow: onOverflow,
		spawn: spawn, flushed: make(chan struct{})}
}

// push queues b. It reports false when the outbox is closed or has just
// overflowed; the caller then stops sending.
func (o *outbox) push(b []byte) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	if o.bytes+len(b) > o.limit && o.bytes > 0 {
		o.overflow, o.closed = true, true
		o.items, o.bytes = nil, 0
		o.mu.Unlock()
		o.signal()
		if o.onOverflow != nil {
			o.onOverflow()
		}
		return false
	}
	o.items = append(o.items, b)
	o.bytes += len(b)
	if o.spawn != nil {
		o.startWriterLocked()
		o.mu.Unlock()
		return true
	}
	o.mu.Unlock()
	o.signal()
	return true
}

// startWriterLocked starts a writer if there is something to write, the
// connection is ready and none runs. o.mu is held.
func (o *outbox) startWriterLocked() {
	if o.ready && !o.writing && len(o.items) > 0 && !o.overflow {
		o.writing = true
		o.spawn()
	}
}

// begin says the connection is up: messages queued so far (a tab follows
// its user's events before its upgrade completes) and later ones are
// written from now on.
func (o *outbox) begin() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ready = true
	o.startWriterLocked()
}

// signal wakes a writer that waits on wake.
func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take removes and returns everything queued, and whether the outbox overflowed.
func (o *outbox) take() (items [][]byte, overflowed bool) {
	o.mu.Lock()
	items, o.items, o.bytes = o.items, nil, 0
	overflowed = o.overflow
	o.mu.Unlock()
	o.tookItems()
	return items, overflowed
}

// next is take for a spawned writer: ok is false when the writer must end,
// because the queue is empty (the writer no longer runs: the next push
// starts another) or the outbox overflowed.
func (o *outbox) next() (items [][]byte, ok bool) {
	o.mu.Lock()
	if o.overflow || len(o.items) == 0 {
		o.writing = false
		o.flushIfDrainedLocked()
		o.mu.Unlock()
		return nil, false
	}
	items, o.items, o.bytes = o.items, nil, 0
	o.mu.Unlock()
	o.tookItems()
	return items, true
}

func (o *outbox) tookItems() {
	select {
	case o.taken <- struct{}{}:
	default:
	}
}

// drain asks for flushed to be closed once everything queued is written.
func (o *outbox) drain() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.draining = true
	if o.spawn != nil {
		o.startWriterLocked()
	}
	o.flushIfDrainedLocked()
}

func (o *outbox) flushIfDrainedLocked() {
	if o.draining && !o.writing && o.flushed != nil && !o.flushedDone {
		o.flushedDone = true
		close(o.flushed)
	}
}

// waitRoom blocks until at most a quarter of the limit is queued, the
// outbox is closed, or ctx ends.
func (o *outbox) waitRoom(ctx context.Context) {
	for {
		o.mu.Lock()
		ok := o.closed || o.bytes <= o.limit/4
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-o.taken:
		case <-ctx.Done():
			return
		}
	}
}

// close stops further pushes; what is queued can still be taken.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

// empty reports whether nothing is waiting.
func (o *outbox) empty() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.items) == 0
}
