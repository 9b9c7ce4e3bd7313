package gateway_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/task"
)

// anonCookie loads a page and returns the anonymous session cookie it set.
func (e *env) anonCookie(h http.Header) *http.Cookie {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/", nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == gateway.SessionCookie {
			return c
		}
	}
	return nil
}

// TestCookieWritesNeedOrigin: a write authenticated by the session cookie
// must carry an allowed Origin; a missing one is refused 403 like a foreign
// one (PROTOCOL.md section 1). GETs may omit it, and a bearer token needs none.
func TestCookieWritesNeedOrigin(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.anonymous = true; o.noRunner = true })
	cookie := e.anonCookie(nil)
	post := func(origin string) int {
		body := `{"task_id":"` + newID() + `","conversation_id":"` + newID() + `","content":"hi"}`
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/tasks", strings.NewReader(body))
		req.AddCookie(cookie)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(""); got != http.StatusForbidden {
		t.Errorf("cookie POST without Origin: %d, want 403", got)
	}
	if got := post("http://evil.example"); got != http.StatusForbidden {
		t.Errorf("cookie POST from a foreign Origin: %d, want 403", got)
	}
	if got := post(e.srv.URL); got != http.StatusCreated {
		t.Errorf("cookie POST from the gateway's own origin: %d, want 201", got)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/conversations", nil)
	req.AddCookie(cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("cookie GET without Origin: %v %v", err, resp)
	}
	resp.Body.Close()

	j := setup(t, func(o *envOptions) { o.noRunner = true })
	if code, body := j.httpDo("POST", "/v1/tasks", "ivy", map[string]string{"task_id": newID(),
		"conversation_id": newID(), "content": "hi"}); code != http.StatusCreated {
		t.Errorf("bearer POST without Origin: %d %v", code, body)
	}
}

// TestAnonymousCookieSecureAndRenewed: the anonymous cookie is Secure when
// the client came over TLS (as a trusted proxy says; an untrusted peer's
// X-Forwarded-Proto is ignored), expires, is renewed while used (same user)
// and, once expired, is a new user. A cookie of the first format still
// verifies and is renewed.
func TestAnonymousCookieSecureAndRenewed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ttl := 10 * 24 * time.Hour
	e := setup(t, func(o *envOptions) {
		o.anonymous = true
		o.noRunner = true
		o.gateway.Now = clock
		o.gateway.SessionTTL = ttl
		o.gateway.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	c := e.anonCookie(nil)
	if c == nil || c.Secure || !c.HttpOnly || c.MaxAge != int(ttl/time.Second) {
		t.Fatalf("cookie over plain HTTP: %+v", c)
	}
	if s := e.anonCookie(http.Header{"X-Forwarded-Proto": {"https"}}); s == nil || !s.Secure {
		t.Fatalf("cookie behind a TLS-terminating trusted proxy: %+v", s)
	}
	untrusted := setup(t, func(o *envOptions) { o.anonymous = true; o.noRunner = true })
	if s := untrusted.anonCookie(http.Header{"X-Forwarded-Proto": {"https"}}); s == nil || s.Secure {
		t.Fatalf("X-Forwarded-Proto from an untrusted peer made the cookie Secure: %+v", s)
	}

	userOf := func(c *http.Cookie) (string, *http.Cookie) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/tasks", strings.NewReader(
			`{"task_id":"`+newID()+`","conversation_id":"`+newID()+`","content":"hi"}`))
		req.AddCookie(c)
		req.Header.Set("Origin", e.srv.URL)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("submit: %v %v", err, resp)
		}
		resp.Body.Close()
		var renewed *http.Cookie
		for _, rc := range resp.Cookies() {
			if rc.Name == gateway.SessionCookie {
				renewed = rc
			}
		}
		convs := e.conversationsOf(c)
		return convs, renewed
	}
	first, renewed := userOf(c)
	if renewed != nil {
		t.Fatalf("a fresh cookie was renewed at once: %+v", renewed)
	}
	advance(2 * 24 * time.Hour)
	second, renewed := userOf(c)
	if renewed == nil || renewed.MaxAge != int(ttl/time.Second) || !strings.HasPrefix(second, first) {
		t.Fatalf("a used cookie two days old: renewed %+v; conversations before %q, after %q", renewed, first, second)
	}
	// The renewed cookie lives on past the first one's expiry; the old one does not.
	advance(9 * 24 * time.Hour)
	if convs, _ := userOf(renewed); !strings.HasPrefix(convs, second) {
		t.Fatalf("the renewed cookie lost its user: %q vs %q", convs, second)
	}
	if convs := e.conversationsOf(c); convs != "" {
		t.Fatalf("an expired cookie still acts as its user: %q", convs)
	}

	// A cookie of the first format (user.mac, no issue time) keeps its user
	// and is renewed in the current format at once.
	user := "anon-" + newID()
	m := hmac.New(sha256.New, []byte(anonCookieKey))
	m.Write([]byte("tether anonymous session\x00" + user))
	enc := base64.RawURLEncoding
	legacy := &http.Cookie{Name: gateway.SessionCookie, Value: enc.EncodeToString([]byte(user)) + "." + enc.EncodeToString(m.Sum(nil))}
	convs, renewed := userOf(legacy)
	if renewed == nil || strings.Count(renewed.Value, ".") != 2 || e.conversationsOf(renewed) != convs || convs == "" {
		t.Fatalf("a first-format cookie: renewed %+v, conversations %q", renewed, convs)
	}
}

// conversationsOf lists, as one string of ids, the conversations the user
// of cookie c sees.
func (e *env) conversationsOf(c *http.Cookie) string {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/conversations?limit=200", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("conversations: %v %v", err, resp)
	}
	defer resp.Body.Close()
	var out struct{ Conversations []task.Conversation }
	_ = jsonDecode(resp, &out)
	var ids []string
	for i := len(out.Conversations) - 1; i >= 0; i-- { // oldest first
		ids = append(ids, out.Conversations[i].ID)
	}
	return strings.Join(ids, ",")
}

// TestJWTChecks: exp must be a number (a string is refused, not read as
// one), aud and iss are checked when configured, and a secret shorter than
// 32 bytes is refused at start.
func TestJWTChecks(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) {
		o.noRunner = true
		o.gateway.JWTAudience = "tether"
		o.gateway.JWTIssuer = "https://id.example"
	})
	exp := time.Now().Add(time.Hour).Unix()
	sign := func(c jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(e.secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := jwt.MapClaims{"sub": "u", "exp": exp, "aud": "tether", "iss": "https://id.example"}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for name, c := range map[string]jwt.MapClaims{
		"exp as a string":  with("exp", strconv.FormatInt(exp, 10)),
		"no exp":           with("exp", nil),
		"other audience":   with("aud", "someone-else"),
		"no audience":      with("aud", nil),
		"other issuer":     with("iss", "https://evil.example"),
		"no issuer":        with("iss", nil),
		"sub not a string": with("sub", 42),
	} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/conversations", nil)
		req.Header.Set("Authorization", "Bearer "+sign(c))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/conversations", nil)
	req.Header.Set("Authorization", "Bearer "+sign(with("aud", []string{"x", "tether"})))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a good token: %v %v", err, resp)
	}
	resp.Body.Close()

	if _, err := gateway.New(gateway.Config{AuthSecret: []byte("only-twenty-bytes-..")}, e.store, fakeBus{}); err == nil {
		t.Error("a 20-byte JWT secret was accepted")
	}
}

// TestSSEEndsAtTokenExpiry: an SSE stream ends at its token's exp with an
// error event whose code is unauthorized, as a tab closes with 1008.
func TestSSEEndsAtTokenExpiry(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	taskID := newID()
	if code, _ := e.httpDo("POST", "/v1/tasks", "sam", map[string]string{"task_id": taskID,
		"conversation_id": newID(), "content": "hi"}); code != http.StatusCreated {
		t.Fatal(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/tasks/"+taskID+"/events", nil)
	exp := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	req.Header.Set("Authorization", "Bearer "+signToken(t, e.secret, "sam", exp))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("SSE: %v %v", err, resp)
	}
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body) // returns when the server ends the stream
	resp.Body.Close()
	if err != nil || ctx.Err() != nil {
		t.Fatalf("stream not ended by the server: %v", err)
	}
	if at := time.Now(); at.Before(exp) || at.After(exp.Add(3*time.Second)) {
		t.Errorf("stream ended at %v, token exp %v", at, exp)
	}
	if !strings.HasSuffix(body.String(), "event: error\ndata: {\"type\":\"error\",\"code\":\"unauthorized\",\"message\":\"token expired\"}\n\n") {
		t.Fatalf("stream did not end with an unauthorized error event:\n%s", body.String())
	}
}

// TestSSEResumeOfFinishedStream: a resume at or past a finished task's
// terminal event answers 204 (an EventSource stops reconnecting); an
// earlier Last-Event-ID still gets what follows.
func TestSSEResumeOfFinishedStream(t *testing.T) {
	t.Parallel()
	e := setup(t)
	taskID := newID()
	tb := e.dial("flo")
	tb.submit(taskID, newID(), "/stream 3 0")
	end := tb.until(func(f frame) bool { return f.Type == "status" && f.Status == "done" })
	for _, last := range []int64{end.Seq, end.Seq + 5} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/tasks/"+taskID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+e.token("flo", time.Hour))
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("Last-Event-ID %d of a task done at %d: %d, want 204", last, end.Seq, resp.StatusCode)
		}
	}
	evs, stop := e.sse(taskID, "flo", strconv.FormatInt(end.Seq-1, 10))
	defer stop()
	var got []sseEvent
	for ev := range evs {
		got = append(got, ev)
	}
	if len(got) != 1 || got[0].data.Status != "done" {
		t.Fatalf("resume one before the end: %+v", got)
	}
}

// fakeBus is a gateway.Bus that is never reached (for New's checks).
type fakeBus struct{ gateway.Bus }

func jsonDecode(resp *http.Response, v any) error {
	return json.NewDecoder(resp.Body).Decode(v)
}
