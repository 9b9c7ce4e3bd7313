package uploads_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/uploads"
	"github.com/tether-dev/tether/internal/uploads/s3test"
)

// downStore is an upload store whose database is away.
type downStore struct{ task.UploadStore }

var errDown = task.Unavailable("postgres", errors.New("connection refused"))

func (downStore) CreateUpload(context.Context, task.NewUpload) (task.Upload, error) {
	return task.Upload{}, errDown
}

func (downStore) Upload(context.Context, string, string) (task.Upload, error) {
	return task.Upload{}, errDown
}

// With Postgres away every upload request answers 503 unavailable with
// Retry-After, whether tusd answers it (create, offset) or the service
// does (download), so a tus client or a fetch knows to try again.
func TestUnavailableSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	store := pgtest.New(t, postgres.Config{})
	dir, err := uploads.NewDir(filepath.Join(t.TempDir(), "uploads"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := uploads.New(uploads.Config{}, downStore{store}, dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.Serve(w, r, r.Header.Get(userHeader))
	}))
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv}

	id := uuid.NewString()
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
	}{
		{"create", "POST", "/v1/uploads/", map[string]string{"Tus-Resumable": "1.0.0",
			"Upload-Length": strconv.Itoa(10), "Upload-Metadata": metadata("filename", "a.txt")}},
		{"offset", "HEAD", "/v1/uploads/" + id, map[string]string{"Tus-Resumable": "1.0.0"}},
		{"download", "GET", "/v1/uploads/" + id, nil},
	} {
		r := e.do(c.method, c.path, "u1", c.header, nil)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
			t.Errorf("%s: %d, Retry-After %q, %s", c.name, r.status, r.header.Get("Retry-After"), r.body)
		}
		if c.method != "HEAD" && r.errCode() != string(task.CodeUnavailable) {
			t.Errorf("%s: code %q, want unavailable (%s)", c.name, r.errCode(), r.body)
		}
	}
}

// TestS3DownIsUnavailable: with the S3 server killed, whatever needs the
// bytes (creation, PATCH, download) answers 503 unavailable with
// Retry-After, while HEAD, which needs only Postgres, still tells the
// offset. Once the server is back on the same data the upload resumes
// from that offset and comes out byte-exact.
func TestS3DownIsUnavailable(t *testing.T) {
	t.Parallel()
	s3 := s3test.Start(t)
	e := setupOn(t, uploads.Config{}, s3.Blobs("uploads/"))
	data := randomBytes(t, 3<<20+5)
	p := e.create("ann", "big.bin", len(data))
	const first = 1 << 20
	if r := e.patch("ann", p, 0, data[:first]); r.status != http.StatusNoContent {
		t.Fatalf("first PATCH: %d %s", r.status, r.body)
	}
	small := []byte("finished before the outage")
	done := e.create("ann", "done.txt", len(small))
	if r := e.patch("ann", done, 0, small); r.status != http.StatusNoContent {
		t.Fatalf("small PATCH: %d %s", r.status, r.body)
	}

	s3.Kill()
	for _, c := range []struct {
		name string
		r    reply
	}{
		{"create", e.do("POST", "/v1/uploads/", "ann", map[string]string{"Tus-Resumable": "1.0.0",
			"Upload-Length": "10", "Upload-Metadata": metadata("filename", "a.txt")}, nil)},
		{"patch", e.patch("ann", p, first, data[first:])},
		{"download", e.do("GET", done, "ann", nil, nil)},
	} {
		if c.r.status != http.StatusServiceUnavailable || c.r.header.Get("Retry-After") != "1" ||
			c.r.errCode() != string(task.CodeUnavailable) {
			t.Errorf("%s with S3 down: %d, Retry-After %q, %s", c.name, c.r.status, c.r.header.Get("Retry-After"), c.r.body)
		}
	}
	if off := e.offset("ann", p); off != first {
		t.Fatalf("HEAD with S3 down: offset %d, want %d", off, first)
	}

	s3.Restart()
	off := e.offset("ann", p)
	if off != first {
		t.Fatalf("HEAD after the outage: offset %d, want %d", off, first)
	}
	if r := e.patch("ann", p, off, data[off:]); r.status != http.StatusNoContent {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	for path, want := range map[string][]byte{p: data, done: small} {
		if dl := e.do("GET", path, "ann", nil, nil); dl.status != http.StatusOK || sum(dl.body) != sum(want) {
			t.Fatalf("download %s: %d, %d bytes", path, dl.status, len(dl.body))
		}
	}
}
