package uploads_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/fakeclock"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/uploads"
)

// env is the upload service on a real Postgres schema and a temporary
// directory (or other Blobs), behind an HTTP server that takes the user from a test header
// (the gateway's authentication is tested in the gateway's own tests).
type env struct {
	t     testing.TB
	store *postgres.Store
	dir   *uploads.Dir
	svc   *uploads.Service
	srv   *httptest.Server
	clock *fakeclock.Clock
}

const userHeader = "X-Test-User"

func setup(t testing.TB, cfg uploads.Config) *env {
	t.Helper()
	dir, err := uploads.NewDir(filepath.Join(t.TempDir(), "uploads"))
	if err != nil {
		t.Fatal(err)
	}
	e := setupOn(t, cfg, dir)
	e.dir = dir
	return e
}

// setupOn is setup with the bytes in blobs.
func setupOn(t testing.TB, cfg uploads.Config, blobs uploads.Blobs) *env {
	t.Helper()
	c := fakeclock.New(time.Now())
	store := pgtest.New(t, postgres.Config{Now: c.Now})
	cfg.Now = c.Now
	svc, err := uploads.New(cfg, store, blobs)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.Serve(w, r, r.Header.Get(userHeader))
	}))
	t.Cleanup(srv.Close)
	return &env{t: t, store: store, svc: svc, srv: srv, clock: c}
}

// reply is an HTTP answer, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errCode is the code of Tether's JSON error body ("" if there is none).
func (r reply) errCode() string {
	var b struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &b)
	return b.Error.Code
}

func (e *env) do(method, p, user string, header map[string]string, body []byte) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+p, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// metadata encodes tus Upload-Metadata.
func metadata(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+" "+base64.StdEncoding.EncodeToString([]byte(kv[i+1])))
	}
	return strings.Join(parts, ",")
}

// create makes an upload of size bytes named name and returns its path.
func (e *env) create(user, name string, size int) string {
	e.t.Helper()
	r := e.do("POST", "/v1/uploads/", user, map[string]string{
		"Tus-Resumable":   "1.0.0",
		"Upload-Length":   strconv.Itoa(size),
		"Upload-Metadata": metadata("filename", name, "filetype", "application/octet-stream"),
	}, nil)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.status, r.body)
	}
	loc := r.header.Get("Location")
	if !strings.HasPrefix(loc, "/v1/uploads/") {
		e.t.Fatalf("Location %q is not a path under /v1/uploads/", loc)
	}
	return loc
}

func (e *env) head(user, p string) reply {
	return e.do("HEAD", p, user, map[string]string{"Tus-Resumable": "1.0.0"}, nil)
}

func (e *env) patch(user, p string, offset int, body []byte) reply {
	return e.do("PATCH", p, user, map[string]string{
		"Tus-Resumable": "1.0.0",
		"Content-Type":  "application/offset+octet-stream",
		"Upload-Offset": strconv.Itoa(offset),
	}, body)
}

func (e *env) offset(user, p string) int {
	e.t.Helper()
	r := e.head(user, p)
	if r.status != http.StatusOK {
		e.t.Fatalf("HEAD %s: %d", p, r.status)
	}
	n, err := strconv.Atoi(r.header.Get("Upload-Offset"))
	if err != nil {
		e.t.Fatalf("HEAD %s: Upload-Offset %q", p, r.header.Get("Upload-Offset"))
	}
	return n
}

// file is the blob of an upload on disk.
func (e *env) file(p string) string {
	id := path.Base(p)
	return filepath.Join(e.dir.Root(), id[:2], id)
}

func (e *env) rows(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.store.Pool().QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileSum(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return sum(b)
}

func newID() string { return uuid.NewString() }
