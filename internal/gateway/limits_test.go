package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestTabsPerUserCapped: a user's WebSocket tabs and SSE streams together
// are capped per gateway; beyond it the upgrade (or stream) is refused 429
// rate_limited and counted; a closed tab frees its place; other users are
// not affected.
func TestTabsPerUserCapped(t *testing.T) {
	t.Parallel()
	// No runner: the task stays pending, so its SSE stream stays open.
	e := setup(t, func(o *envOptions) { o.gateway.MaxTabsPerUser = 3; o.noRunner = true })
	a1, a2 := e.dial("ann"), e.dial("ann")
	taskID := newID()
	if r := a1.submit(taskID, newID(), "hello"); r.Type != "submitted" {
		t.Fatal(r.raw)
	}
	_, stopSSE := e.sse(taskID, "ann", "") // the third tab
	h := http.Header{"Authorization": {"Bearer " + e.token("ann", time.Hour)}}
	_, resp, err := e.dialHeader(h)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || errorBody(t, resp.Body) != "rate_limited" {
		t.Fatalf("fourth tab of one user: %v %v", err, resp)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/tasks/"+taskID+"/events", nil)
	req.Header = h
	sresp, err := http.DefaultClient.Do(req)
	if err != nil || sresp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("an SSE stream beyond the cap: %v %v", err, sresp)
	}
	sresp.Body.Close()
	e.dial("bob") // another user is not affected
	if got := e.metric(`tether_gateway_limit_refusals_total{limit="tabs_per_user"}`); got != 2 {
		t.Errorf("refusals counted: %v", got)
	}
	// Closing tabs frees places.
	stopSSE()
	_ = a2.c.CloseNow()
	eventually.True(t, "places freed", func() bool {
		tb, _, err := e.dialHeader(h)
		if err == nil {
			_ = tb.c.CloseNow()
		}
		return err == nil
	})
}

// TestConnRatePerIP: new connections of one client address beyond the
// burst answer 429 and are closed; requests on a connection already let in
// are not counted again.
func TestConnRatePerIP(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.gateway.ConnRate = 0.5; o.noRunner = true }) // burst 1
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = e.gw.HTTPServer(time.Minute)
	srv.Start()
	defer srv.Close()

	get := func(c *http.Client) (int, string) {
		resp, err := c.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			return resp.StatusCode, errorBody(t, resp.Body) + " close=" + fmt.Sprint(resp.Close)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, ""
	}
	kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	for range 5 { // one connection, kept alive: counted once
		if code, _ := get(kept); code != http.StatusOK {
			t.Fatalf("keep-alive request refused: %d", code)
		}
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	code, detail := get(fresh)
	if code != http.StatusTooManyRequests || detail != "rate_limited close=true" {
		t.Fatalf("a new connection beyond the burst: %d %s", code, detail)
	}
	if got := e.metric(`tether_gateway_limit_refusals_total{limit="conn_rate"}`); got != 1 {
		t.Errorf("refusals counted: %v", got)
	}
}

// TestIdleKeepAliveClosed: a keep-alive connection left idle after a
// request is closed by the server after the idle timeout.
func TestIdleKeepAliveClosed(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = e.gw.HTTPServer(300 * time.Millisecond)
	srv.Start()
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", err, resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v", d)
	}
}

// TestTabLimits: a tab's subscriptions and its requests in flight (cancels
// included) are bounded; beyond either, the request gets rate_limited and
// the tab stays open.
func TestTabLimits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := setup(t, func(o *envOptions) {
		o.noRunner = true
		o.gateway.MaxSubscriptions = 2
		o.gateway.MaxPending = 2
		o.wrapStore = func(_ *env, s task.Store) task.Store { return blockingConversations{s, release} }
	})
	tb := e.dial("cy")
	for i := range 2 {
		if r := tb.submit(newID(), newID(), fmt.Sprint("hi ", i)); r.Type != "submitted" {
			t.Fatal(r.raw)
		}
	}
	if r := tb.submit(newID(), newID(), "one too many"); r.Code != "rate_limited" {
		t.Fatalf("a third subscription: %s", r.raw)
	}
	// Requests in flight: one handled (blocked in the store), one waiting,
	// the rest refused at once.
	for i := range 5 {
		tb.send(map[string]any{"type": "conversations", "req": fmt.Sprint("c", i)})
	}
	refused := 0
	for refused < 3 {
		if f := tb.next(); f.Code == "rate_limited" {
			refused++
		} else if f.Type == "conversations" {
			t.Fatalf("answered while blocked: %s", f.raw)
		}
	}
	close(release)
	for answered := 0; answered < 2; {
		if f := tb.next(); f.Type == "conversations" {
			answered++
		}
	}
	if r := tb.call(map[string]any{"type": "ping"}); r.Type != "pong" {
		t.Fatalf("tab after refusals: %s", r.raw)
	}
	if got := e.metric(`tether_gateway_limit_refusals_total{limit="pending_requests"}`); got != 3 {
		t.Errorf("pending refusals counted: %v", got)
	}
	if got := e.metric(`tether_gateway_limit_refusals_total{limit="subscriptions"}`); got != 1 {
		t.Errorf("subscription refusals counted: %v", got)
	}
}

// blockingConversations holds Conversations until release is closed.
type blockingConversations struct {
	task.Store
	release chan struct{}
}

func (b blockingConversations) Conversations(ctx context.Context, user string, p task.Page) ([]task.Conversation, string, error) {
	<-b.release
	return b.Store.Conversations(ctx, user, p)
}

// TestRetriesBounded: a user may retry one failed task a bounded number of
// times; the next retry is a conflict, counted as a limit refusal.
func TestRetriesBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.store = postgres.Config{MaxRetries: 2} })
	tb := e.dial("dee")
	taskID, convID := newID(), newID()
	for i := range 3 {
		r := tb.submit(taskID, convID, "/fail 1 0")
		if r.Type != "submitted" {
			t.Fatalf("submit %d: %s", i, r.raw)
		}
		tb.until(func(f frame) bool { return f.Type == "status" && f.TaskID == taskID && f.Status == "failed" })
	}
	r := tb.submit(taskID, convID, "/fail 1 0")
	if r.Code != "conflict" || !strings.Contains(r.Message, "retried 2 times") {
		t.Fatalf("a third retry: %s", r.raw)
	}
	if got := e.metric(`tether_gateway_limit_refusals_total{limit="retries"}`); got != 1 {
		t.Errorf("retry refusals counted: %v", got)
	}
}
