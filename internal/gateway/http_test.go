package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-dev/tether/internal/engine/enginetest"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/webui"
)

// TestHTTP walks the HTTP endpoints of PROTOCOL.md section 5.
func TestHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t)
	taskID, convID := newID(), newID()
	body := map[string]any{"task_id": taskID, "conversation_id": convID, "content": "/stream 4 0"}

	code, tk := e.httpDo("POST", "/v1/tasks", "lou", body)
	if code != http.StatusCreated || tk["id"] != taskID {
		t.Fatalf("POST /v1/tasks: %d %v", code, tk)
	}
	if code, _ := e.httpDo("POST", "/v1/tasks", "lou", body); code != http.StatusOK {
		t.Fatalf("repeat POST: %d", code)
	}
	body["content"] = "something else"
	if code, out := e.httpDo("POST", "/v1/tasks", "lou", body); code != http.StatusConflict || errCode(out) != "conflict" {
		t.Fatalf("conflicting POST: %d %v", code, out)
	}
	eventually.True(t, "the task to finish", func() bool {
		_, tk := e.httpDo("GET", "/v1/tasks/"+taskID, "lou", nil)
		return tk["status"] == "done"
	})
	_, tk = e.httpDo("GET", "/v1/tasks/"+taskID, "lou", nil)
	if tk["output"] != enginetest.StreamText(4) || tk["seq"] == nil || tk["attempt"].(float64) != 1 {
		t.Fatalf("GET task: %v", tk)
	}
	if code, tk := e.httpDo("POST", "/v1/tasks/"+taskID+"/cancel", "lou", nil); code != http.StatusOK || tk["status"] != "done" {
		t.Fatalf("cancel of a done task: %d %v", code, tk)
	}
	code, out := e.httpDo("GET", "/v1/conversations/"+convID+"/messages?limit=1", "lou", nil)
	msgs, _ := out["messages"].([]any)
	if code != http.StatusOK || len(msgs) != 1 || out["next"] == nil {
		t.Fatalf("messages page 1: %d %v", code, out)
	}
	next := out["next"].(string)
	code, out = e.httpDo("GET", "/v1/conversations/"+convID+"/messages?limit=1&before="+next, "lou", nil)
	msgs, _ = out["messages"].([]any)
	if code != http.StatusOK || len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "user" || out["next"] != nil {
		t.Fatalf("messages page 2: %d %v", code, out)
	}
	code, out = e.httpDo("GET", "/v1/conversations", "lou", nil)
	cs, _ := out["conversations"].([]any)
	if code != http.StatusOK || len(cs) != 1 || cs[0].(map[string]any)["active_task_id"] != nil {
		t.Fatalf("conversations: %d %v", code, out)
	}

	bad := []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"GET", "/v1/tasks/not-a-uuid", nil, 400, "invalid"},
		{"GET", "/v1/tasks/" + newID(), nil, 404, "not_found"},
		{"POST", "/v1/tasks/" + newID() + "/cancel", nil, 404, "not_found"},
		{"POST", "/v1/tasks", map[string]any{"task_id": newID(), "conversation_id": newID(), "content": strings.Repeat("x", 40000)}, 413, "too_large"},
		{"POST", "/v1/tasks", map[string]any{"task_id": "nope"}, 400, "invalid"},
		{"GET", "/v1/conversations?limit=0", nil, 400, "invalid"},
		{"GET", "/v1/conversations?before=garbage", nil, 400, "invalid"},
		{"GET", "/v1/conversations/" + newID() + "/messages", nil, 404, "not_found"},
		{"GET", "/v1/results/anything", nil, 400, "invalid"},
		{"GET", "/v1/results/" + newID(), nil, 404, "not_found"},
		{"GET", "/v1/nothing-here", nil, 404, "not_found"},
		{"PUT", "/v1/tasks", nil, 405, "invalid"},
		{"DELETE", "/v1/tasks/" + newID(), nil, 405, "invalid"},
	}
	for _, b := range bad {
		code, out := e.httpDo(b.method, b.path, "lou", b.body)
		if code != b.status || errCode(out) != b.code {
			t.Errorf("%s %s: %d %v, want %d %s", b.method, b.path, code, out, b.status, b.code)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(e.srv.URL + p)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", p, err, resp)
			continue
		}
		resp.Body.Close()
	}
}

// TestLargeResult: an answer over the inline limit ends with an empty output
// and a result_ref whose result is the exact answer, for its owner only.
func TestLargeResult(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.store.ResultInlineMax = 100 })
	tb := e.dial("pia")
	taskID, convID := newID(), newID()
	f := &follower{taskID: taskID}
	f.apply(tb.submit(taskID, convID, "/stream 50 0"))
	var last frame
	for {
		last = tb.next()
		if f.apply(last) {
			break
		}
	}
	var ref string
	if err := json.Unmarshal(last.field("result_ref"), &ref); err != nil || ref == "" {
		t.Fatalf("terminal status without result_ref: %s", last.raw)
	}
	if f.output() != enginetest.StreamText(50) {
		t.Fatalf("live output %q", f.output())
	}
	snap := tb.call(map[string]any{"type": "subscribe", "task_id": taskID})
	if *snap.Task.Output != "" || !strings.Contains(snap.raw, ref) {
		t.Fatalf("snapshot of a spilled task: %s", snap.raw)
	}
	code, res := e.httpDo("GET", "/v1/results/"+ref, "pia", nil)
	if code != http.StatusOK || res["content"] != enginetest.StreamText(50) || res["task_id"] != taskID {
		t.Fatalf("GET result: %d %v", code, res)
	}
	if code, _ := e.httpDo("GET", "/v1/results/"+ref, "quinn", nil); code != http.StatusNotFound {
		t.Fatalf("another user's result: %d", code)
	}
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestRateLimit: beyond TETHER_RATE (burst twice that) a user gets rate_limited.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.gateway.Rate = 1; o.noRunner = true })
	tb := e.dial("max")
	limited := false
	for i := 0; i < 10 && !limited; i++ {
		limited = tb.call(map[string]any{"type": "ping"}).Code == "rate_limited"
	}
	if !limited {
		t.Fatal("10 pings at once were never limited at rate 1/s")
	}
	if code, out := e.httpDo("GET", "/v1/conversations", "max", nil); code != http.StatusTooManyRequests || errCode(out) != "rate_limited" {
		t.Fatalf("HTTP shares the user's bucket: %d %v", code, out)
	}
	// Another user has a bucket of their own.
	if r := e.dial("ned").call(map[string]any{"type": "ping"}); r.Type != "pong" {
		t.Fatal(r.raw)
	}
}

// TestShutdownCloses1012: a gateway shutdown ends tabs with 1012.
func TestShutdownCloses1012(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	tb := e.dial("olga")
	if r := tb.call(map[string]any{"type": "ping"}); r.Type != "pong" {
		t.Fatal(r.raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _ = e.gw.Shutdown(ctx) }()
	if code := tb.closed(); code != websocket.StatusServiceRestart {
		t.Fatalf("closed with %d, want 1012", code)
	}
}

// TestAnonymousCookie: without a secret the gateway gives each browser an
// anonymous user in a signed cookie; its tabs are one user, a cookie upgrade
// needs a matching Origin, and a forged cookie is a new user.
func TestAnonymousCookie(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.anonymous = true; o.noRunner = true })
	resp, err := http.Get(e.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "tether_session" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode {
		t.Fatalf("session cookie: %+v", cookie)
	}
	origin := e.srv.URL
	h := http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}, "Origin": {origin}}
	a, _, err := e.dialHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	taskID, convID := newID(), newID()
	if r := a.submit(taskID, convID, "hello"); r.Type != "submitted" {
		t.Fatal(r.raw)
	}
	b, _, err := e.dialHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.call(map[string]any{"type": "subscribe", "task_id": taskID}); r.Type != "snapshot" {
		t.Fatalf("second tab of the same browser: %s", r.raw)
	}
	for name, hdr := range map[string]http.Header{
		"missing origin": {"Cookie": {cookie.Name + "=" + cookie.Value}},
		"foreign origin": {"Cookie": {cookie.Name + "=" + cookie.Value}, "Origin": {"http://evil.example"}},
	} {
		if _, resp, err := e.dialHeader(hdr); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %v %v", name, err, resp)
		}
	}
	forged, _, err := e.dialHeader(http.Header{"Cookie": {cookie.Name + "=" + cookie.Value + "x"}, "Origin": {origin}})
	if err != nil {
		t.Fatal(err)
	}
	if r := forged.call(map[string]any{"type": "subscribe", "task_id": taskID}); r.Code != "not_found" {
		t.Fatalf("a forged cookie must not be the same user: %s", r.raw)
	}
}

// TestSSEBadInput: a bad Last-Event-ID or task id is refused with a JSON
// error before any stream starts, and a missing task looks missing.
func TestSSEBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	cases := []struct {
		path, lastID string
		status       int
		code         string
	}{
		{"/v1/tasks/" + newID() + "/events", "abc", 400, "invalid"},
		{"/v1/tasks/" + newID() + "/events", "-3", 400, "invalid"},
		{"/v1/tasks/not-a-uuid/events", "", 400, "invalid"},
		{"/v1/tasks/" + newID() + "/events", "", 404, "not_found"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", e.srv.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+e.token("uma", time.Hour))
		if c.lastID != "" {
			req.Header.Set("Last-Event-ID", c.lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != c.status || errCode(out) != c.code {
			t.Errorf("%s (Last-Event-ID %q): %d %v, want %d %s", c.path, c.lastID, resp.StatusCode, out, c.status, c.code)
		}
	}
}

// TestConversationURLsServeTheUI: GET /c/<anything> is the UI's address of a
// conversation (a bookmark, a new tab, F5): through the gateway's mux it gets
// index.html with the same headers as "/", the session cookie included.
func TestConversationURLsServeTheUI(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.anonymous = true; o.noRunner = true; o.gateway.UI = webui.Handler() })
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	root, index := get("/")
	if root.StatusCode != http.StatusOK || index == "" {
		t.Fatalf("GET / = %d %q", root.StatusCode, index)
	}
	for _, path := range []string{"/c/" + newID(), "/c/not-a-uuid", "/c/"} {
		resp, body := get(path)
		if resp.StatusCode != http.StatusOK || body != index {
			t.Errorf("GET %s = %d, body %d bytes, want index.html (%d bytes)", path, resp.StatusCode, len(body), len(index))
		}
		for _, name := range []string{"Content-Type", "Cache-Control", "X-Content-Type-Options", "Content-Security-Policy"} {
			if got, want := resp.Header.Get(name), root.Header.Get(name); got != want {
				t.Errorf("GET %s %s = %q, want %q as for /", path, name, got, want)
			}
		}
		var session bool
		for _, c := range resp.Cookies() {
			session = session || c.Name == "tether_session"
		}
		if !session {
			t.Errorf("GET %s set no session cookie, as / does for a new browser", path)
		}
	}
}
