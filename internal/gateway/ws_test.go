package gateway_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-dev/tether/internal/engine/enginetest"
)

// TestMessages walks every client message of PROTOCOL.md section 4 and its reply.
func TestMessages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tb := e.dial("alice")
	taskID, convID := newID(), newID()

	if r := tb.call(map[string]any{"type": "ping"}); r.Type != "pong" {
		t.Fatalf("ping: %s", r.raw)
	}

	r := tb.submit(taskID, convID, "/stream 3 0")
	if r.Type != "submitted" || r.Created == nil || !*r.Created || r.Task == nil || r.Task.ID != taskID {
		t.Fatalf("submit: %s", r.raw)
	}
	f := &follower{taskID: taskID}
	f.apply(r)
	for !f.apply(tb.next()) {
	}
	if f.output() != enginetest.StreamText(3) || f.status != "done" || f.gaps+f.repeats != 0 {
		t.Fatalf("stream: %+v", f)
	}

	r = tb.submit(taskID, convID, "/stream 3 0")
	if r.Type != "submitted" || r.Created == nil || *r.Created || r.Task.Status != "done" || *r.Task.Output != enginetest.StreamText(3) {
		t.Fatalf("repeat submit: %s", r.raw)
	}

	r = tb.call(map[string]any{"type": "subscribe", "task_id": taskID})
	if r.Type != "snapshot" || r.Task.Seq != f.seq || *r.Task.Output != enginetest.StreamText(3) {
		t.Fatalf("subscribe: %s", r.raw)
	}

	r = tb.call(map[string]any{"type": "unsubscribe", "task_id": taskID})
	if r.Type != "unsubscribed" || r.TaskID != taskID {
		t.Fatalf("unsubscribe: %s", r.raw)
	}

	r = tb.call(map[string]any{"type": "cancel", "task_id": taskID})
	if r.Type != "cancelled" || r.Task.Status != "done" {
		t.Fatalf("cancel of a done task changes nothing: %s", r.raw)
	}

	r = tb.call(map[string]any{"type": "history", "conversation_id": convID})
	if r.Type != "history" || len(r.Messages) != 2 || r.Messages[0].Role != "user" ||
		r.Messages[1].Content != enginetest.StreamText(3) || r.Next != nil {
		t.Fatalf("history: %s", r.raw)
	}

	r = tb.call(map[string]any{"type": "conversations"})
	if r.Type != "conversations" || !strings.Contains(r.raw, convID) {
		t.Fatalf("conversations: %s", r.raw)
	}
}

// TestConcurrentSubmits: 50 submits of one id over WebSocket and HTTP at once
// make exactly one task.
func TestConcurrentSubmits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	taskID, convID := newID(), newID()
	const n = 50
	var wg sync.WaitGroup
	created := make(chan bool, n)
	tabs := make([]*tab, n/2)
	for i := range tabs {
		tabs[i] = e.dial("bob")
	}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				r := tabs[i/2].submit(taskID, convID, "/stream 5 0")
				if r.Type != "submitted" {
					t.Errorf("ws submit: %s", r.raw)
					return
				}
				created <- *r.Created
				return
			}
			code, _ := e.httpDo("POST", "/v1/tasks", "bob", map[string]any{"task_id": taskID, "conversation_id": convID, "content": "/stream 5 0"})
			if code != http.StatusCreated && code != http.StatusOK {
				t.Errorf("http submit: %d", code)
				return
			}
			created <- code == http.StatusCreated
		}()
	}
	wg.Wait()
	close(created)
	count := 0
	for c := range created {
		if c {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d submits reported created, want 1", count)
	}
	var tasks, msgs int
	pool := e.store.Pool()
	ctx := t.Context()
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM tasks WHERE id = $1", taskID).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM messages WHERE conversation_id = $1", convID).Scan(&msgs); err != nil {
		t.Fatal(err)
	}
	if tasks != 1 || msgs != 2 {
		t.Fatalf("tasks=%d messages=%d, want 1 and 2", tasks, msgs)
	}
}

// TestBadFrames: every kind of bad message gets an error and the tab stays.
func TestBadFrames(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	tb := e.dial("carol")
	cases := []struct {
		name, frame, code string
	}{
		{"not json", `{nope`, "invalid"},
		{"not an object", `[1,2]`, "invalid"},
		{"unknown type", `{"type":"dance","req":"x1"}`, "invalid"},
		{"no type", `{"req":"x2"}`, "invalid"},
		{"bad uuid", `{"type":"subscribe","req":"x3","task_id":"nope"}`, "invalid"},
		{"missing field", `{"type":"submit","req":"x4","task_id":"` + newID() + `"}`, "invalid"},
		{"empty content", `{"type":"submit","req":"x5","task_id":"` + newID() + `","conversation_id":"` + newID() + `","content":""}`, "invalid"},
		{"content too large", `{"type":"submit","req":"x6","task_id":"` + newID() + `","conversation_id":"` + newID() + `","content":"` + strings.Repeat("a", 32769) + `"}`, "too_large"},
		{"limit out of range", `{"type":"history","req":"x7","conversation_id":"` + newID() + `","limit":500}`, "invalid"},
		{"field of wrong type", `{"type":"history","req":"x8","conversation_id":"` + newID() + `","limit":"ten"}`, "invalid"},
		{"tampered cursor", `{"type":"conversations","req":"x9","before":"AAAA"}`, "invalid"},
		{"missing task", `{"type":"subscribe","req":"x10","task_id":"` + newID() + `"}`, "not_found"},
	}
	for _, c := range cases {
		tb.sendRaw(websocket.MessageText, []byte(c.frame))
		r := tb.until(func(f frame) bool { return f.Type == "error" })
		if r.Code != c.code {
			t.Errorf("%s: got %s, want code %s", c.name, r.raw, c.code)
		}
	}
	if r := tb.call(map[string]any{"type": "ping"}); r.Type != "pong" {
		t.Fatalf("tab not kept after bad frames: %s", r.raw)
	}
}

func TestCloseCodes(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	cases := []struct {
		name  string
		typ   websocket.MessageType
		frame []byte
		code  websocket.StatusCode
	}{
		{"oversized", websocket.MessageText, []byte(`{"type":"ping","pad":"` + strings.Repeat("a", 70000) + `"}`), websocket.StatusMessageTooBig},
		{"binary", websocket.MessageBinary, []byte(`{"type":"ping"}`), websocket.StatusUnsupportedData},
		{"invalid utf-8", websocket.MessageText, []byte("{\"type\":\"ping\",\"req\":\"\xff\xfe\"}"), websocket.StatusInvalidFramePayloadData},
	}
	for _, c := range cases {
		tb := e.dial("dave")
		tb.sendRaw(c.typ, c.frame)
		if got := tb.closed(); got != c.code {
			t.Errorf("%s: closed with %d, want %d", c.name, got, c.code)
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	cases := []struct {
		name   string
		header http.Header
		status int
	}{
		{"missing", http.Header{}, http.StatusUnauthorized},
		{"expired", http.Header{"Authorization": {"Bearer " + signToken(t, e.secret, "u", time.Now().Add(-time.Minute))}}, http.StatusUnauthorized},
		{"foreign-signed", http.Header{"Authorization": {"Bearer " + signToken(t, []byte("another secret entirely!"), "u", time.Now().Add(time.Hour))}}, http.StatusUnauthorized},
		{"foreign origin", http.Header{"Authorization": {"Bearer " + e.token("u", time.Hour)}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
	}
	for _, c := range cases {
		_, resp, err := e.dialHeader(c.header)
		if err == nil {
			t.Errorf("%s: upgrade accepted", c.name)
			continue
		}
		if resp == nil || resp.StatusCode != c.status {
			t.Errorf("%s: got %v, want status %d", c.name, resp, c.status)
		}
	}
	// The same rules on HTTP.
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/conversations", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("HTTP without a token: %d", resp.StatusCode)
	}
	// ?token= works for WebSocket.
	tb, _, err := e.dialQuery(e.token("u", time.Hour))
	if err != nil {
		t.Fatalf("?token=: %v", err)
	}
	if r := tb.call(map[string]any{"type": "ping"}); r.Type != "pong" {
		t.Fatal(r.raw)
	}
}

// TestTokenExpiryClosesTab: a token that expires while connected ends the tab with 1008.
func TestTokenExpiryClosesTab(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	// JWT exp has one-second resolution: a token valid for the next 2s.
	tb, _, err := e.dialHeader(http.Header{"Authorization": {"Bearer " + signToken(t, e.secret, "u", time.Now().Add(2*time.Second))}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.closed(); got != websocket.StatusPolicyViolation {
		t.Fatalf("closed with %d, want 1008", got)
	}
}

// TestIsolation: another user's ids look exactly like missing ones.
func TestIsolation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a, b := e.dial("alice"), e.dial("mallory")
	taskID, convID := newID(), newID()
	if r := a.submit(taskID, convID, "/stream 2 0"); r.Type != "submitted" {
		t.Fatal(r.raw)
	}
	missing := newID()
	for _, id := range []string{taskID, missing} {
		for _, typ := range []string{"subscribe", "cancel"} {
			r := b.call(map[string]any{"type": typ, "task_id": id})
			if r.Type != "error" || r.Code != "not_found" {
				t.Errorf("%s of %s: %s", typ, id, r.raw)
			}
		}
	}
	r1 := b.call(map[string]any{"type": "history", "conversation_id": convID})
	r2 := b.call(map[string]any{"type": "history", "conversation_id": missing})
	if r1.Code != "not_found" || r2.Code != "not_found" || r1.Message != r2.Message {
		t.Errorf("history: %s vs %s", r1.raw, r2.raw)
	}
	if r := b.submit(taskID, convID, "/stream 2 0"); r.Code != "conflict" {
		t.Errorf("submit of another user's id: %s", r.raw)
	}
	if r := b.submit(newID(), convID, "hi"); r.Code != "conflict" {
		t.Errorf("submit into another user's conversation: %s", r.raw)
	}
	if code, _ := e.httpDo("GET", "/v1/tasks/"+taskID, "mallory", nil); code != http.StatusNotFound {
		t.Errorf("HTTP get of another user's task: %d", code)
	}
	if r := b.call(map[string]any{"type": "conversations"}); len(r.Conversations) != 0 {
		t.Errorf("conversations leak: %s", r.raw)
	}
}

// TestResubscribeSameTab: subscribing again on the same tab sends a new
// snapshot and never doubles the events that follow.
func TestResubscribeSameTab(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tb := e.dial("sam")
	taskID, convID := newID(), newID()
	f := &follower{taskID: taskID}
	f.apply(tb.submit(taskID, convID, "/stream 200 3"))
	snapshots := 0
	for done := false; !done; {
		m := tb.next()
		if m.Type == "snapshot" {
			snapshots++
		}
		done = f.apply(m)
		if !done && m.Type == "delta" && m.Seq%40 == 0 {
			tb.send(map[string]any{"type": "subscribe", "task_id": taskID, "req": "again"})
		}
	}
	if snapshots == 0 || f.gaps != 0 || f.repeats != 0 || f.output() != enginetest.StreamText(200) {
		t.Fatalf("%d snapshots, %d gaps, %d repeats, output %d bytes", snapshots, f.gaps, f.repeats, len(f.output()))
	}
}

// TestCancelPending: with no runner, a cancel moves the pending task to
// cancelled at once, and the tab that submitted it sees the status event.
func TestCancelPending(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	tb := e.dial("tia")
	taskID, convID := newID(), newID()
	f := &follower{taskID: taskID}
	f.apply(tb.submit(taskID, convID, "/stream 5 0"))
	r := e.dial("tia").call(map[string]any{"type": "cancel", "task_id": taskID})
	if r.Type != "cancelled" || r.Task.Status != "cancelled" || r.Task.Seq != 1 {
		t.Fatalf("cancel reply: %s", r.raw)
	}
	for !f.apply(tb.next()) {
	}
	if f.status != "cancelled" || f.seq != 1 || f.gaps+f.repeats != 0 {
		t.Fatalf("submitting tab: %+v", f)
	}
	if r := tb.call(map[string]any{"type": "cancel", "task_id": taskID}); r.Task.Status != "cancelled" || r.Task.Seq != 1 {
		t.Fatalf("a second cancel changes nothing: %s", r.raw)
	}
}
