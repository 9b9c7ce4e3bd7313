package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/uploads"
	"github.com/tether-dev/tether/internal/uploads/s3test"
)

// TestUploadAcrossGatewaysOnS3: two gateways share one Postgres and one S3
// bucket and nothing else. An upload started through gateway A is cut
// mid-way (the client's connection drops), resumed through gateway B (HEAD
// for the offset, PATCH the rest), attached to a message and read by the
// runner, which has no upload directory; deleting the conversation removes
// the upload's objects from the bucket.
func TestUploadAcrossGatewaysOnS3(t *testing.T) {
	t.Parallel()
	s3 := s3test.Start(t)
	lu := &lazyUploads{}
	e := setup(t, withUploadsOn(t, lu, s3.Blobs("uploads/"), 32<<20))
	b := secondGateway(t, e, s3.Blobs("uploads/"))

	data := randomData(t, 10<<20+777)
	meta := "filename " + b64("big.bin") + ",filetype " + b64("application/octet-stream")
	resp := tusDo(t, "POST", e.srv.URL+"/v1/uploads/", e.bearer("ann"), map[string]string{
		"Upload-Length": strconv.Itoa(len(data)), "Upload-Metadata": meta}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create through A: %d", resp.StatusCode)
	}
	p := resp.Header.Get("Location")
	id := path.Base(p)

	// Through A, a PATCH announcing every byte, cut after 9 MiB and change:
	// more than one segment, so one part is recorded and one is not whole.
	sent := 9<<20 + 4321
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PATCH %s HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\n"+
		"Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\n"+
		"Content-Length: %d\r\nAuthorization: Bearer %s\r\n\r\n", p, len(data), e.token("ann", time.Hour))
	if _, err := conn.Write(data[:sent]); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	eventually.True(t, "A to record the bytes that reached it", func() bool {
		u, err := e.store.Upload(context.Background(), "ann", id)
		return err == nil && u.Offset == int64(sent)
	})

	// Through B: the offset, then the rest.
	resp = tusDo(t, "HEAD", b.URL+p, e.bearer("ann"), nil, nil)
	off, _ := strconv.Atoi(resp.Header.Get("Upload-Offset"))
	if resp.StatusCode != http.StatusOK || off != sent {
		t.Fatalf("HEAD through B: %d, offset %q, want %d", resp.StatusCode, resp.Header.Get("Upload-Offset"), sent)
	}
	resp = tusDo(t, "PATCH", b.URL+p, e.bearer("ann"), map[string]string{
		"Content-Type": "application/offset+octet-stream", "Upload-Offset": strconv.Itoa(off)}, data[off:])
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != strconv.Itoa(len(data)) {
		t.Fatalf("resume through B: %d, offset %q", resp.StatusCode, resp.Header.Get("Upload-Offset"))
	}

	// Submitted through B, answered by the runner from Postgres alone.
	tb, _, err := e.dialURL("ws"+strings.TrimPrefix(b.URL, "http")+"/v1/ws", e.bearer("ann"))
	if err != nil {
		t.Fatal(err)
	}
	taskID, convID := newID(), newID()
	if r := tb.call(map[string]any{"type": "submit", "task_id": taskID, "conversation_id": convID,
		"content": "/attachments", "attachments": []string{id}}); r.Type != "submitted" {
		t.Fatalf("submit: %s", r.raw)
	}
	f := &follower{taskID: taskID}
	for !f.apply(tb.next()) {
	}
	if want := fmt.Sprintf("big.bin %d %s", len(data), sha(data)); f.status != "done" || f.output() != want {
		t.Fatalf("answer (%s): %q\nwant %q", f.status, f.output(), want)
	}
	// A serves the bytes B stored.
	if got := download(t, e.srv.URL+p, e.bearer("ann")); sha(got) != sha(data) {
		t.Fatalf("download through A: %d bytes, sha256 %s", len(got), sha(got))
	}

	if keys := s3.Keys("uploads/" + id + "/"); len(keys) == 0 {
		t.Fatal("no objects of the upload in the bucket")
	}
	if resp := tusDo(t, "DELETE", b.URL+"/v1/conversations/"+convID, e.bearer("ann"), nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete the conversation: %d", resp.StatusCode)
	}
	eventually.True(t, "the sweep to remove the upload's objects", func() bool {
		return len(s3.Keys("uploads/"+id+"/")) == 0
	})
}

// secondGateway is another gateway on e's Postgres and NATS with its own
// upload service on blobs, and no upload directory.
func secondGateway(t *testing.T, e *env, blobs uploads.Blobs) *httptest.Server {
	t.Helper()
	svc, err := uploads.New(uploads.Config{MaxSize: 32 << 20}, e.store, blobs)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{AuthSecret: e.secret, Uploads: svc, Logger: quietLogger()},
		e.store, natsgateway.New(e.bus))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
		srv.Close()
	})
	return srv
}

func randomData(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// download GETs url with auth and returns the body of a 200.
func download(t testing.TB, url string, auth http.Header) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header = auth
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}
