package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func serve(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// builtFS looks like a Vite build: index.html and hashed assets.
var builtFS = fstest.MapFS{
	".keep":                  {Data: nil},
	"index.html":             {Data: []byte(`<!doctype html><div id="app"></div><script src="/assets/index-abc123.js"></script>`)},
	"assets/index-abc123.js": {Data: []byte(`console.log(1)`)},
}

func TestHandlerServesBuiltUI(t *testing.T) {
	t.Parallel()
	h := handler(builtFS)
	for _, target := range []string{"/", "/index.html", "/some/deep/link"} {
		rec := serve(t, h, http.MethodGet, target)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="app"`) {
			t.Errorf("GET %s = %d %q, want index.html", target, rec.Code, rec.Body.String())
		}
		if got := rec.Header().Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s Cache-Control = %q, want no-cache", target, got)
		}
		if got := rec.Header().Get("Content-Type"); !strings.HasPrefix(got, "text/html") {
			t.Errorf("GET %s Content-Type = %q", target, got)
		}
	}

	rec := serve(t, h, http.MethodGet, "/assets/index-abc123.js")
	if rec.Code != http.StatusOK || rec.Body.String() != "console.log(1)" {
		t.Fatalf("GET asset = %d %q", rec.Code, rec.Body.String())
	}
	if got := rec.Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
		t.Errorf("asset Cache-Control = %q, want a long immutable cache", got)
	}
	if rec := serve(t, h, http.MethodGet, "/assets/missing.js"); rec.Code != http.StatusNotFound {
		t.Errorf("missing asset = %d, want 404", rec.Code)
	}
	if rec := serve(t, h, http.MethodHead, "/"); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD / = %d with %d body bytes", rec.Code, rec.Body.Len())
	}
	if rec := serve(t, h, http.MethodPost, "/"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d, want 405", rec.Code)
	}
}

func TestHandlerWhenNotBuilt(t *testing.T) {
	t.Parallel()
	empty := fstest.MapFS{".keep": {Data: nil}}
	if built(empty) {
		t.Fatal("built() = true without index.html")
	}
	rec := serve(t, handler(empty), http.MethodGet, "/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", rec.Code)
	}
	if body := rec.Body.String(); !strings.Contains(body, "make ui") || !strings.Contains(body, "make run") {
		t.Errorf("page does not say how to build the UI: %q", body)
	}
}

func TestEmbedded(t *testing.T) {
	t.Parallel()
	// The embedded tree always holds dist/.keep; whether index.html is there
	// depends on `make ui` having run, and Handler must answer 200 either way.
	rec := serve(t, Handler(), http.MethodGet, "/")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d (built: %v)", rec.Code, Built())
	}
}

// TestConversationURLs: /c/<id> is the UI's address of a conversation; a
// bookmark, a new tab or F5 there gets index.html with the same headers as
// "/", whatever the id (the UI says "not found" for one that names nothing).
func TestConversationURLs(t *testing.T) {
	t.Parallel()
	h := handler(builtFS)
	root := serve(t, h, http.MethodGet, "/")
	for _, target := range []string{
		"/c/3f2a7c1e-9b4d-4e8a-8c2f-1a2b3c4d5e6f",
		"/c/3f2a7c1e-9b4d-4e8a-8c2f-1a2b3c4d5e6f/",
		"/c/not-a-uuid",
		"/c/",
		"/c/%E0%A4",
	} {
		rec := serve(t, h, http.MethodGet, target)
		if rec.Code != http.StatusOK || rec.Body.String() != root.Body.String() {
			t.Errorf("GET %s = %d %q, want index.html", target, rec.Code, rec.Body.String())
		}
		for _, name := range []string{"Content-Type", "Cache-Control", "X-Content-Type-Options", "Content-Security-Policy"} {
			if got, want := rec.Header().Get(name), root.Header().Get(name); got != want {
				t.Errorf("GET %s %s = %q, want %q as for /", target, name, got, want)
			}
		}
	}
	if rec := serve(t, h, http.MethodHead, "/c/3f2a7c1e-9b4d-4e8a-8c2f-1a2b3c4d5e6f"); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD /c/<id> = %d with %d body bytes", rec.Code, rec.Body.Len())
	}
}
