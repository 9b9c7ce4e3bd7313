package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/gateway"
)

// CORS (PROTOCOL.md section 11) holds for every HTTP endpoint: an allowed
// origin gets its answers and its preflights, any other origin neither.
func TestCORSForAllowedOriginsOnly(t *testing.T) {
	t.Parallel()
	const app = "http://127.0.0.1:5999"
	e := setup(t, func(o *envOptions) {
		o.noRunner = true
		o.gateway = gateway.Config{AllowedOrigins: []string{app}}
	})
	preflight := func(origin, path, headers string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, e.srv.URL+path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", headers)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("preflight: %v", err)
		}
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/v1/tasks", "/v1/uploads/", "/v1/tasks/" + uuid.NewString() + "/events", "/v1/responses"} {
		resp := preflight(app, path, "authorization, content-type, idempotency-key, x-stainless-os, upload-offset, x-evil")
		h := resp.Header
		if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != app ||
			h.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
			t.Fatalf("preflight %s from %s: %d %v", path, app, resp.StatusCode, h)
		}
		allowed := h.Get("Access-Control-Allow-Headers")
		for _, want := range []string{"authorization", "content-type", "idempotency-key", "x-stainless-os", "upload-offset"} {
			if !strings.Contains(allowed, want) {
				t.Fatalf("preflight %s: %q allows no %s", path, allowed, want)
			}
		}
		if strings.Contains(allowed, "x-evil") {
			t.Fatalf("preflight %s allows a header no client of ours sends: %q", path, allowed)
		}
		if !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
			t.Fatalf("preflight %s: no Vary: Origin", path)
		}
		if bad := preflight("http://evil.example", path, "authorization"); bad.StatusCode != http.StatusForbidden ||
			bad.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight %s from a foreign origin: %d %v", path, bad.StatusCode, bad.Header)
		}
	}

	// A plain request: the allowed origin sees the answer and the headers
	// a tus client needs; a foreign one gets no CORS header.
	get := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/conversations", nil)
		req.Header.Set("Authorization", "Bearer "+e.token("u1", 3600e9))
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(app); resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Upload-Offset") {
		t.Fatalf("GET from the app: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := get("http://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("GET from a foreign origin got CORS headers: %v", resp.Header)
	}
}

// In anonymous mode a bearer value that is not a JWT names a user of its
// own: the same key is the same user, another key another one.
func TestAnonymousAPIKeysAreUsers(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.anonymous = true; o.noRunner = true })
	do := func(method, path, key, body string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		if resp.Header.Get("Set-Cookie") != "" && key != "" {
			t.Fatalf("an API key request got a session cookie")
		}
		return resp.StatusCode, b.String()
	}
	taskID, convID := uuid.NewString(), uuid.NewString()
	// No Origin needed: a bearer key is not a cookie.
	if code, body := do(http.MethodPost, "/v1/tasks", "Bearer sk-alpha",
		`{"task_id":"`+taskID+`","conversation_id":"`+convID+`","content":"hi"}`); code != http.StatusCreated {
		t.Fatalf("submit with a key: %d %s", code, body)
	}
	if code, _ := do(http.MethodGet, "/v1/tasks/"+taskID, "Bearer sk-alpha", ""); code != http.StatusOK {
		t.Fatalf("the same key reads its task: %d", code)
	}
	if code, _ := do(http.MethodGet, "/v1/tasks/"+taskID, "Bearer sk-beta", ""); code != http.StatusNotFound {
		t.Fatalf("another key reads the task: %d; want 404", code)
	}
	for _, bad := range []string{"Bearer ", "Basic c2stYWxwaGE=", "Bearer " + strings.Repeat("k", 513)} {
		if code, _ := do(http.MethodGet, "/v1/conversations", bad, ""); code != http.StatusUnauthorized {
			t.Fatalf("Authorization %.20q: %d; want 401", bad, code)
		}
	}
}
