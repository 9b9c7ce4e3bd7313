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
