package gateway

import (
	"log/slog"
	"sync"
)

// userHub keeps one upstream subscription per user with tabs on this
// gateway and hands that user's `task` events to each of their tabs.
type userHub struct {
	bus Bus
	log *slog.Logger

	mu    sync.Mutex
	users map[string]*userTopic
}

type userTopic struct {
	// ready is closed once the upstream subscription is made (or failed,
	// with err set); tabs is only used with the hub's lock held.
	ready chan struct{}
	err   error
	tabs  map[*wsSession]struct{}
	unsub func() error
}

func newUserHub(bus Bus, log *slog.Logger) *userHub {
	return &userHub{bus: bus, log: log, users: map[string]*userTopic{}}
}

// attach registers a tab; from its return on, the tab gets every task event
// of its user. The first tab of a user puts the user's topic in place under
// the lock and subscribes outside it (a round trip to NATS), so upgrades of
// other users never wait for it; the user's other tabs wait for that
// subscription, not for the lock.
func (h *userHub) attach(user string, ss *wsSession) error {
	h.mu.Lock()
	t, ok := h.users[user]
	if !ok {
		t = &userTopic{ready: make(chan struct{}), tabs: map[*wsSession]struct{}{}}
		h.users[user] = t
	}
	t.tabs[ss] = struct{}{}
	h.mu.Unlock()

	if !ok {
		unsub, err := h.bus.SubscribeUser(user, func(data []byte) { h.deliver(user, data) })
		h.mu.Lock()
		t.unsub, t.err = unsub, err
		if err != nil && h.users[user] == t {
			// Tabs waiting for it fail too; the next tab tries afresh.
			delete(h.users, user)
		}
		h.mu.Unlock()
		close(t.ready)
	}
	<-t.ready
	if t.err != nil {
		h.mu.Lock()
		delete(t.tabs, ss)
		h.mu.Unlock()
		return t.err
	}
	return nil
}

func (h *userHub) detach(user string, ss *wsSession) {
	var unsub func() error
	h.mu.Lock()
	t, ok := h.users[user]
	if ok {
		delete(t.tabs, ss)
		if len(t.tabs) == 0 {
			delete(h.users, user)
			unsub = t.unsub
		}
	}
	h.mu.Unlock()
	// Only an attached tab detaches, after its attach returned: the topic's
	// subscription is made.
	if unsub != nil {
		if err := unsub(); err != nil {
			h.log.Debug("unsubscribe user", "err", err)
		}
	}
}

func (h *userHub) deliver(user string, data []byte) {
	h.mu.Lock()
	t := h.users[user]
	var tabs []*wsSession
	if t != nil {
		tabs = make([]*wsSession, 0, len(t.tabs))
		for ss := range t.tabs {
			tabs = append(tabs, ss)
		}
	}
	h.mu.Unlock()
	for _, ss := range tabs {
		ss.send(data)
	}
}

func (h *userHub) close() {
	h.mu.Lock()
	topics := h.users
	h.users = map[string]*userTopic{}
	h.mu.Unlock()
	for _, t := range topics {
		<-t.ready
		if t.unsub != nil {
			_ = t.unsub()
		}
	}
}
