package natsbus

import (
	"hash/maphash"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go"
)

// router delivers the messages of the bus's core subscriptions to their
// handlers from a fixed set of goroutines instead of nats.go's one goroutine
// per subscription: a gateway holds a subscription per followed task and per
// user with a tab, and a parked goroutine for each would cost more memory
// than the tab itself. Each subscription is a channel subscription on one
// shard, chosen by its subject, and each shard is served by one goroutine,
// so a subscription's messages are handled one at a time, in order, as with
// an ordinary subscription. Handlers must not block for long: a shard's other
// subscriptions wait meanwhile (the gateway's only queue into its tabs'
// outboxes).
//
// A shard whose channel is full drops the message (nats.go's slow consumer);
// the subscription's lost callback then runs, so its owner can catch up from
// the log instead of waiting for an event that will never come.
type router struct {
	shards []chan *nats.Msg
	seed   maphash.Seed
	// routes maps a *nats.Subscription to its *route. mu is held (for
	// writing) while a subscription is made and entered, so a message that
	// arrives before the entry exists waits for it rather than being lost.
	routes sync.Map
	mu     sync.RWMutex

	done chan struct{}
	wg   sync.WaitGroup
}

type route struct {
	handle func(*nats.Msg)
	lost   func()
}

// shardDepth is how many messages a shard holds before it drops: a burst of
// that many events for the tasks of one shard is absorbed.
const shardDepth = 1 << 14

func newRouter() *router {
	r := &router{seed: maphash.MakeSeed(), done: make(chan struct{})}
	r.shards = make([]chan *nats.Msg, max(4, 2*runtime.GOMAXPROCS(0)))
	for i := range r.shards {
		r.shards[i] = make(chan *nats.Msg, shardDepth)
		r.wg.Add(1)
		go r.serve(r.shards[i])
	}
	return r
}

func (r *router) serve(ch chan *nats.Msg) {
	defer r.wg.Done()
	for {
		select {
		case m := <-ch:
			if rt := r.lookup(m.Sub); rt != nil {
				rt.handle(m)
			}
		case <-r.done:
			return
		}
	}
}

func (r *router) lookup(sub *nats.Subscription) *route {
	if v, ok := r.routes.Load(sub); ok {
		return v.(*route)
	}
	// Not entered yet (its subscribe is still running), or gone.
	r.mu.RLock()
	defer r.mu.RUnlock()
	if v, ok := r.routes.Load(sub); ok {
		return v.(*route)
	}
	return nil
}

// subscribe makes a subscription whose messages go to handle; lost (may be
// nil) is told, in a goroutine of its own, when messages were dropped.
func (r *router) subscribe(nc *nats.Conn, subject string, handle func(*nats.Msg), lost func()) (*nats.Subscription, error) {
	ch := r.shards[maphash.String(r.seed, subject)%uint64(len(r.shards))]
	r.mu.Lock()
	defer r.mu.Unlock()
	sub, err := nc.ChanSubscribe(subject, ch)
	if err != nil {
		return nil, err
	}
	r.routes.Store(sub, &route{handle: handle, lost: lost})
	return sub, nil
}

// unsubscribe ends sub; messages of it still queued are dropped.
func (r *router) unsubscribe(sub *nats.Subscription) error {
	err := sub.Unsubscribe()
	r.routes.Delete(sub)
	return err
}

// slow tells sub's owner that messages were dropped.
func (r *router) slow(sub *nats.Subscription) {
	if rt := r.lookup(sub); rt != nil && rt.lost != nil {
		go rt.lost()
	}
}

// close stops the shard goroutines; the connection is closed already, so
// nothing more is queued.
func (r *router) close() {
	close(r.done)
	r.wg.Wait()
}
