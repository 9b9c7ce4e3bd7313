package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/engine/enginetest"
)

// answer is one submitted task followed by several tabs.
type answer struct {
	taskID  string
	conv    string // the conversation id it was submitted into
	content string
	n       int // tokens expected
	tabs    []*tab
	want    string
}

// newAnswer makes the ids of a /stream n ms answer, not yet submitted
// (so a watcher can follow the task before its first event).
func newAnswer(n, ms int) *answer {
	return &answer{taskID: uuid.NewString(), conv: uuid.NewString(), content: fmt.Sprintf("/stream %d %d", n, ms), n: n, want: enginetest.StreamText(n)}
}

// submit submits /stream n ms with the given number of tabs (see open).
func (s *system) submit(t testing.TB, tabs, n, ms int) *answer {
	t.Helper()
	a := newAnswer(n, ms)
	s.open(t, a, tabs)
	return a
}

// open submits a through a first tab, waits for the reply, then opens the
// other tabs with a subscribe each and waits for their snapshots. Without a
// balancer the tabs are spread over the gateways (the first on gateway-1);
// with one, every tab connects to it and it spreads them.
func (s *system) open(t testing.TB, a *answer, tabs int) {
	t.Helper()
	name, url := s.tabURL(1)
	first := openTab(t, name, url, s.token, a.taskID, map[string]any{
		"type": "submit", "req": "submit", "task_id": a.taskID, "conversation_id": a.conv, "content": a.content,
	})
	a.tabs = append(a.tabs, first)
	if err := first.waitUntil(30*time.Second, "submitted", func(*follower) bool { return first.submitted }); err != nil {
		t.Fatal(err)
	}
	s.follow(t, a, 2, tabs)
	s.notef(t, "submitted %s %q, %d tabs", a.taskID, a.content, len(a.tabs))
}

// follow opens tabs from..to (numbered from 1) that subscribe to a's task,
// and waits for every tab's first snapshot.
func (s *system) follow(t testing.TB, a *answer, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		name, url := s.tabURL(i)
		a.tabs = append(a.tabs, openTab(t, name, url, s.token, a.taskID, nil))
	}
	for _, tb := range a.tabs {
		if err := tb.waitUntil(30*time.Second, "first snapshot", func(f *follower) bool { return f.snapshots > 0 }); err != nil {
			t.Fatal(err)
		}
	}
}

// tabURL names the i-th tab (from 1) of an answer and gives the address it
// connects to: the balancer, or gateway i modulo their number.
func (s *system) tabURL(i int) (name, url string) {
	if s.lb != nil {
		return fmt.Sprintf("tab-%d@lb", i), "ws://" + s.lb.addr() + "/v1/ws"
	}
	g := s.gateways[(i-1)%len(s.gateways)]
	return fmt.Sprintf("tab-%d@%s", i, g.name), g.wsURL()
}

// waitTokens waits until every tab holds at least k tokens of output, all
// within one timeout.
func (a *answer) waitTokens(t testing.TB, k int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, tb := range a.tabs {
		left := max(time.Until(deadline), 10*time.Millisecond)
		if err := tb.waitUntil(left, fmt.Sprintf("%d tokens", k), func(f *follower) bool { return len(f.out) >= bytesFor(k) }); err != nil {
			t.Fatal(err)
		}
	}
}

// waitDone waits until every tab holds a terminal status, all within one
// timeout.
func (a *answer) waitDone(t testing.TB, timeout time.Duration) bool {
	t.Helper()
	ok := true
	deadline := time.Now().Add(timeout)
	for _, tb := range a.tabs {
		left := max(time.Until(deadline), 10*time.Millisecond)
		if err := tb.waitUntil(left, "terminal status", func(f *follower) bool { return f.terminal && !f.broken }); err != nil {
			t.Error(err)
			ok = false
		}
	}
	return ok
}

// probe opens one more tab on every gateway after the answer should have
// ended, for the diagnosis of tabs that did not see the end: does a fresh
// subscribe get the whole answer? It reports, it asserts nothing.
func (s *system) probe(t testing.TB, a *answer) {
	t.Helper()
	for _, g := range s.gateways {
		p := openTab(t, "probe@"+g.name, g.wsURL(), s.token, a.taskID, nil)
		err := p.waitUntil(10*time.Second, "terminal status", func(f *follower) bool { return f.terminal })
		p.view(func(f *follower) {
			s.notef(t, "probe: a fresh tab on %s: %s; exact: %v; wait: %v", g.name, f.counters(), string(f.out) == a.want, err)
		})
		p.close()
	}
}
