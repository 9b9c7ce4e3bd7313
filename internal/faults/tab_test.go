package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// tab is one WebSocket client of a gateway following one task, like a
// browser tab: it submits (or subscribes), splits each frame on newlines,
// applies stream events with the 1.1 rule, and reconnects with backoff and
// subscribes again, getting a fresh snapshot, when its connection drops.
type tab struct {
	name   string
	url    string // ws://127.0.0.1:PORT/v1/ws
	token  string
	taskID string
	// submit is the first message of a submitting tab; nil for a tab that
	// subscribes to an existing task.
	submit map[string]any

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	f         *follower
	changed   chan struct{}
	submitted bool
	connects  int
	drops     []time.Time // when a connection was lost (not closed by us)
	snapAt    []time.Time // when each snapshot arrived
	resyncs   int         // subscribes sent to repair a gap
	// unsolicited counts snapshots the gateway sent without being asked (no
	// req): it could not fill a gap from the log and resynced the tab.
	unsolicited int
	errs        []string // error replies
	reqN        int
	current     *websocket.Conn // the connection of the running session
	// local is the local address of every TCP connection the tab made, in
	// order: behind the balancer it names the gateway each one reached.
	local []string
	logf  func(format string, args ...any)
}

// openTab starts a tab on url. With submit set it submits first; otherwise
// it subscribes to taskID. It is closed when t ends.
func openTab(t testing.TB, name, url, token, taskID string, submit map[string]any) *tab {
	ctx, cancel := context.WithCancel(context.Background())
	tb := &tab{
		name: name, url: url, token: token, taskID: taskID, submit: submit,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		f: newFollower(), changed: make(chan struct{}), logf: t.Logf,
	}
	go tb.run()
	t.Cleanup(tb.close)
	return tb
}

func (tb *tab) close() {
	tb.mu.Lock()
	tb.logf = func(string, ...any) {}
	tb.mu.Unlock()
	tb.cancel()
	<-tb.done
}

// run connects, reconnects with full-jitter exponential backoff (a quarter
// of a second doubling to two seconds: faster than a browser's 1s..30s so
// scenarios stay short), and reads until the tab is closed.
func (tb *tab) run() {
	defer close(tb.done)
	backoff := 250 * time.Millisecond
	// A transport of the tab's own that records each connection's local
	// address, and never reuses one: every dial is a new TCP connection.
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				tb.mu.Lock()
				tb.local = append(tb.local, c.LocalAddr().String())
				tb.mu.Unlock()
			}
			return c, err
		},
	}}
	for tb.ctx.Err() == nil {
		dialCtx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
		c, _, err := websocket.Dial(dialCtx, tb.url, &websocket.DialOptions{
			HTTPClient: client,
			HTTPHeader: http.Header{"Authorization": {"Bearer " + tb.token}},
		})
		cancel()
		if err == nil {
			backoff = 250 * time.Millisecond
			c.SetReadLimit(64 << 20)
			err = tb.session(c)
			_ = c.CloseNow()
			if tb.ctx.Err() != nil {
				return
			}
			tb.mu.Lock()
			tb.drops = append(tb.drops, time.Now())
			tb.broadcastLocked()
			tb.mu.Unlock()
			tb.log("%s: connection lost: %v", tb.name, err)
		}
		wait := time.Duration(rand.Int64N(int64(backoff))) + backoff/4
		backoff = min(2*backoff, 2*time.Second)
		timer := time.NewTimer(wait) // a reconnect backoff, not a synchronisation
		select {
		case <-tb.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

func (tb *tab) log(format string, args ...any) {
	tb.mu.Lock()
	logf := tb.logf
	tb.mu.Unlock()
	logf(format, args...)
}

// session is one connection: the first message, then every frame until the
// connection ends.
func (tb *tab) session(c *websocket.Conn) error {
	tb.mu.Lock()
	tb.connects++
	tb.current = c
	first := tb.submit != nil && !tb.submitted
	tb.mu.Unlock()
	defer func() {
		tb.mu.Lock()
		tb.current = nil
		tb.mu.Unlock()
	}()
	if first {
		if err := tb.send(c, tb.submit); err != nil {
			return err
		}
	} else if err := tb.subscribe(c); err != nil {
		return err
	}
	for {
		typ, data, err := c.Read(tb.ctx)
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			return fmt.Errorf("binary frame from the gateway")
		}
		now := time.Now()
		var resync bool
		tb.mu.Lock()
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var m wireMsg
			if err := json.Unmarshal(line, &m); err != nil {
				tb.f.problem("undecodable frame line %q: %v", truncate(line, 200), err)
				continue
			}
			if tb.handleLocked(m, now) {
				resync = true
			}
		}
		tb.broadcastLocked()
		tb.mu.Unlock()
		if resync {
			tb.mu.Lock()
			tb.resyncs++
			tb.mu.Unlock()
			if err := tb.subscribe(c); err != nil {
				return err
			}
		}
	}
}

// handleLocked applies one server object; true asks for a fresh snapshot
// (after a gap, as a real client does).
func (tb *tab) handleLocked(m wireMsg, now time.Time) bool {
	switch {
	case isStreamEvent(m.Type):
		if m.TaskID != tb.taskID {
			return false
		}
		return tb.f.apply(m, now) == gap
	case m.Type == "submitted" || m.Type == "snapshot":
		if m.Task == nil || m.Task.ID != tb.taskID {
			return false
		}
		if m.Type == "submitted" {
			tb.submitted = true
		}
		if m.Type == "snapshot" && m.Req == "" {
			tb.unsolicited++
		}
		tb.snapAt = append(tb.snapAt, now)
		tb.f.reset(*m.Task)
	case m.Type == "error":
		tb.errs = append(tb.errs, fmt.Sprintf("%s %s: %s (req %s)", now.Format("15:04:05.000"), m.Code, m.Message, m.Req))
		if m.Req != "" {
			// The gateway could not answer our submit or subscribe now (it
			// may be starting): ask again shortly.
			go tb.retryLater()
		}
	}
	return false
}

// retryLater re-sends the tab's submit or subscribe after a short backoff
// by dropping the connection; the reconnect sends it again.
func (tb *tab) retryLater() {
	timer := time.NewTimer(300 * time.Millisecond) // a retry backoff, not a synchronisation
	defer timer.Stop()
	select {
	case <-tb.ctx.Done():
	case <-timer.C:
		// Simplest correct retry: subscribe (or submit, idempotent) again on
		// a fresh connection.
		tb.dropConnection()
	}
}

// dropConnection closes the running session's connection, if any, so run
// reconnects and sends the first message again.
func (tb *tab) dropConnection() {
	tb.mu.Lock()
	c := tb.current
	tb.mu.Unlock()
	if c != nil {
		_ = c.CloseNow()
	}
}

func (tb *tab) subscribe(c *websocket.Conn) error {
	tb.mu.Lock()
	tb.reqN++
	req := "sub" + strconv.Itoa(tb.reqN)
	tb.mu.Unlock()
	return tb.send(c, map[string]any{"type": "subscribe", "req": req, "task_id": tb.taskID})
}

func (tb *tab) send(c *websocket.Conn, msg map[string]any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, b)
}

func (tb *tab) broadcastLocked() {
	close(tb.changed)
	tb.changed = make(chan struct{})
}

// waitUntil waits until cond holds on the tab's follower, or the timeout.
func (tb *tab) waitUntil(timeout time.Duration, what string, cond func(f *follower) bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		tb.mu.Lock()
		ok := cond(tb.f)
		ch := tb.changed
		state := tb.f.counters()
		tb.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("%s: %s not reached within %v (%s)", tb.name, what, timeout, state)
		}
	}
}

// view runs fn on the follower under the tab's lock.
func (tb *tab) view(fn func(f *follower)) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	fn(tb.f)
}

// outLen is the length of the output the tab holds.
func (tb *tab) outLen() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return len(tb.f.out)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
