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
	tabs  map[*wsSession]struct{}
	unsub func() error
}

func newUserHub(bus Bus, log *slog.Logger) *userHub {
	return &userHub{bus: bus, log: log, users: map[string]*userTopic{}}
}

// attach registers a tab; from its return on, the tab gets every task event
// of its user. The lock is held while subscribing so a second tab of the same
// user never races the first one's subscription.
func (h *userHub) attach(user string, ss *wsSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.users[user]
	if !ok {
		t = &userTopic{tabs: map[*wsSession]struct{}{}}
		unsub, err := h.bus.SubscribeUser(user, func(data []byte) { h.deliver(user, data) })
		if err != nil {
			return err
		}
		t.unsub = unsub
		h.users[user] = t
	}
	t.tabs[ss] = struct{}{}
	return nil
}

func (h *userHub) detach(user string, ss *wsSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.users[user]
	if !ok {
		return
	}
	delete(t.tabs, ss)
	if len(t.tabs) == 0 {
		delete(h.users, user)
		if err := t.unsub(); err != nil {
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
	defer h.mu.Unlock()
	for user, t := range h.users {
		_ = t.unsub()
		delete(h.users, user)
	}
}
