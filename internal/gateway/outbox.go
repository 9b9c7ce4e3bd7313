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
type outbox struct {
	mu       sync.Mutex
	items    [][]byte
	bytes    int
	limit    int
	closed   bool
	overflow bool
	wake     chan struct{}
	// taken is signalled each time the writer takes the queue.
	taken chan struct{}
	// onOverflow runs once, outside the lock, when the limit is passed.
	onOverflow func()
}

func newOutbox(limit int, onOverflow func()) *outbox {
	return &outbox{limit: limit, wake: make(chan struct{}, 1), taken: make(chan struct{}, 1), onOverflow: onOverflow}
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
	o.mu.Unlock()
	o.signal()
	return true
}

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
	select {
	case o.taken <- struct{}{}:
	default:
	}
	return items, overflowed
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
