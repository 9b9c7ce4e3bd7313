package uploads_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/uploads"
)

// TestInterruptedPatchResumesFromHead is the F5 story on the wire: a PATCH
// that carries the whole file is cut off part way (the tab went away), HEAD
// reports how much the server stored, a new PATCH sends the rest from
// there, and the stored file is byte for byte the original. The file is
// larger than the segment after which the offset is recorded, so the cut
// falls after a recorded segment.
func TestInterruptedPatchResumesFromHead(t *testing.T) {
	t.Parallel()
	e := setup(t, uploads.Config{MaxSize: 32 << 20})
	data := randomBytes(t, 12<<20+12345)
	p := e.create("ann", "big.bin", len(data))

	// A PATCH announcing every byte, cut after 10 MiB and change.
	sent := 10<<20 + 777
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PATCH %s HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\n"+
		"Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\n"+
		"Content-Length: %d\r\n%s: ann\r\n\r\n", p, len(data), userHeader)
	if _, err := conn.Write(data[:sent]); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	// Everything that reached the server is kept; HEAD says so.
	id := path.Base(p)
	eventually.True(t, "the received bytes to be recorded", func() bool {
		u, err := e.store.Upload(context.Background(), "ann", id)
		return err == nil && u.Offset == int64(sent)
	})
	off := e.offset("ann", p)
	if off != sent {
		t.Fatalf("HEAD offset %d, want %d", off, sent)
	}
	if r := e.patch("ann", p, off, data[off:]); r.status != http.StatusNoContent || r.header.Get("Upload-Offset") != strconv.Itoa(len(data)) {
		t.Fatalf("resume: %d %v %s", r.status, r.header, r.body)
	}
	if got, want := fileSum(t, e.file(p)), sum(data); got != want {
		t.Fatalf("stored file sha256 %s, want %s", got, want)
	}
	u, err := e.store.Upload(context.Background(), "ann", id)
	if err != nil || !u.Finished || u.SHA256 != sum(data) {
		t.Fatalf("finished upload: %+v %v", u, err)
	}
	dl := e.do("GET", p, "ann", nil, nil)
	if dl.status != http.StatusOK || sum(dl.body) != sum(data) {
		t.Fatalf("download: %d, %d bytes, sha256 %s", dl.status, len(dl.body), sum(dl.body))
	}
}

// TestTruncatedPatchKeepsWhatArrived: a PATCH whose body ends before its
// Content-Length (the connection closes) stores exactly the bytes that
// came, no more, and a PATCH at the old offset is then refused (409), so
// a client must ask HEAD: the tus resume rule.
func TestTruncatedPatchKeepsWhatArrived(t *testing.T) {
	t.Parallel()
	e := setup(t, uploads.Config{})
	data := randomBytes(t, 300_000)
	p := e.create("ann", "t.bin", len(data))
	if r := e.patch("ann", p, 0, data[:1000]); r.status != http.StatusNoContent {
		t.Fatalf("first PATCH: %d %s", r.status, r.body)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PATCH %s HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\n"+
		"Content-Type: application/offset+octet-stream\r\nUpload-Offset: 1000\r\n"+
		"Content-Length: %d\r\n%s: ann\r\n\r\n", p, len(data)-1000, userHeader)
	if _, err := conn.Write(data[1000:5000]); err != nil {
		t.Fatal(err)
	}
	// Half-close: the server reads the end of the body, answers, and the
	// client sees why.
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("truncated PATCH answered %d", resp.StatusCode)
		}
	}
	conn.Close()

	if off := e.offset("ann", p); off != 5000 {
		t.Fatalf("HEAD after a truncated PATCH: offset %d, want the 5000 bytes that came", off)
	}
	if r := e.patch("ann", p, 1000, data[1000:]); r.status != http.StatusConflict || r.errCode() != "conflict" {
		t.Fatalf("PATCH at a stale offset: %d %s", r.status, r.body)
	}
	if st, _ := os.Stat(e.file(p)); st.Size() != 5000 {
		t.Fatalf("a refused PATCH changed the file: %d bytes", st.Size())
	}
	if r := e.patch("ann", p, 5000, data[5000:]); r.status != http.StatusNoContent {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if fileSum(t, e.file(p)) != sum(data) {
		t.Fatal("stored file differs from the original")
	}
}

func TestUploadBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, uploads.Config{MaxSize: 1 << 20})
	create := func(user, meta string, length string) reply {
		return e.do("POST", "/v1/uploads/", user, map[string]string{
			"Tus-Resumable": "1.0.0", "Upload-Length": length, "Upload-Metadata": meta}, nil)
	}

	t.Run("over the limit is 413 before anything is stored", func(t *testing.T) {
		r := create("ann", metadata("filename", "big.bin"), strconv.Itoa(1<<20+1))
		if r.status != http.StatusRequestEntityTooLarge || r.errCode() != "too_large" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		// Creation with upload: refused before the body is read.
		r = e.do("POST", "/v1/uploads/", "ann", map[string]string{"Tus-Resumable": "1.0.0",
			"Upload-Length": strconv.Itoa(2 << 20), "Upload-Metadata": metadata("filename", "big.bin"),
			"Content-Type": "application/offset+octet-stream"}, randomBytes(t, 2<<20))
		if r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("creation with upload: %d %s", r.status, r.body)
		}
		if n := e.rows(`SELECT count(*) FROM uploads WHERE name = 'big.bin'`); n != 0 {
			t.Fatalf("%d rows stored for refused uploads", n)
		}
		if r := e.do("OPTIONS", "/v1/uploads/", "", nil, nil); r.header.Get("Tus-Max-Size") != strconv.Itoa(1<<20) {
			t.Fatalf("OPTIONS: %d %v", r.status, r.header)
		}
	})

	t.Run("names and types", func(t *testing.T) {
		for _, name := range []string{"../etc/passwd", "a/b.txt", `c:\x.txt`, "bell\a.txt", "line\nbreak", "..", "rtl\u202egnp.exe"} {
			r := create("ann", metadata("filename", name), "10")
			if r.status != http.StatusBadRequest || r.errCode() != "invalid" || !strings.Contains(string(r.body), "file name") {
				t.Fatalf("name %q: %d %s", name, r.status, r.body)
			}
		}
		if r := create("ann", metadata("filetype", "text/plain"), "10"); r.status != http.StatusBadRequest {
			t.Fatalf("no name: %d %s", r.status, r.body)
		}
		if r := create("ann", metadata("filename", "x", "filetype", "not a type"), "10"); r.status != http.StatusBadRequest {
			t.Fatalf("bad type: %d %s", r.status, r.body)
		}
		if n := e.rows(`SELECT count(*) FROM uploads`); n != 0 {
			t.Fatalf("%d rows stored for refused names", n)
		}
	})

	t.Run("another user's upload is 404 like a missing one", func(t *testing.T) {
		p := e.create("ann", "mine.txt", 5)
		missing := "/v1/uploads/" + newID()
		for _, target := range []string{p, missing, "/v1/uploads/not-an-id"} {
			for _, r := range []reply{
				e.head("bob", target),
				e.patch("bob", target, 0, []byte("hello")),
				e.do("DELETE", target, "bob", map[string]string{"Tus-Resumable": "1.0.0"}, nil),
				e.do("GET", target, "bob", nil, nil),
			} {
				if r.status != http.StatusNotFound {
					t.Fatalf("%s as bob: %d %s", target, r.status, r.body)
				}
				if len(r.body) > 0 && (r.errCode() != "not_found" || !strings.Contains(string(r.body), `"upload not found"`)) {
					t.Fatalf("%s as bob: body %s", target, r.body)
				}
			}
		}
		if off := e.offset("ann", p); off != 0 {
			t.Fatalf("bob's PATCH stored bytes: offset %d", off)
		}
	})

	t.Run("PATCH at the wrong offset is 409 and stores nothing", func(t *testing.T) {
		p := e.create("ann", "w.txt", 10)
		if r := e.patch("ann", p, 3, []byte("defghij")); r.status != http.StatusConflict || r.errCode() != "conflict" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if st, err := os.Stat(e.file(p)); err != nil || st.Size() != 0 {
			t.Fatalf("file after a refused PATCH: %v %v", st, err)
		}
		if off := e.offset("ann", p); off != 0 {
			t.Fatalf("offset %d", off)
		}
		// More bytes than the upload has room for: 413, nothing stored.
		if r := e.patch("ann", p, 0, []byte("0123456789X")); r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("too long a PATCH: %d %s", r.status, r.body)
		}
		if off := e.offset("ann", p); off != 0 {
			t.Fatalf("offset %d after a too long PATCH", off)
		}
	})

	t.Run("protocol errors", func(t *testing.T) {
		p := e.create("ann", "p.txt", 10)
		r := e.do("PATCH", p, "ann", map[string]string{"Content-Type": "application/offset+octet-stream", "Upload-Offset": "0"}, []byte("x"))
		if r.status != http.StatusPreconditionFailed || r.errCode() != "invalid" {
			t.Fatalf("no Tus-Resumable: %d %s", r.status, r.body)
		}
		r = e.do("PATCH", p, "ann", map[string]string{"Tus-Resumable": "1.0.0", "Upload-Offset": "0", "Content-Type": "text/plain"}, []byte("x"))
		if r.status != http.StatusBadRequest {
			t.Fatalf("wrong Content-Type: %d %s", r.status, r.body)
		}
		r = e.do("POST", "/v1/uploads/", "ann", map[string]string{"Tus-Resumable": "1.0.0", "Upload-Defer-Length": "1",
			"Upload-Metadata": metadata("filename", "d")}, nil)
		if r.status < 400 {
			t.Fatalf("deferred length accepted: %d", r.status)
		}
		if r := e.do("GET", p, "ann", nil, nil); r.status != http.StatusConflict || r.errCode() != "conflict" {
			t.Fatalf("GET of an unfinished upload: %d %s", r.status, r.body)
		}
		if r := e.do("PUT", p, "ann", nil, nil); r.status != http.StatusMethodNotAllowed || r.errCode() != "invalid" {
			t.Fatalf("PUT: %d %s", r.status, r.body)
		}
		if r := e.do("GET", "/v1/uploads/a/b", "ann", nil, nil); r.status != http.StatusNotFound {
			t.Fatalf("nested path: %d %s", r.status, r.body)
		}
	})
}

// TestTerminationAndExpiry: DELETE removes an upload with its bytes; an
// upload no message holds goes after the TTL, swept with its bytes; an
// attached one stays.
func TestTerminationAndExpiry(t *testing.T) {
	t.Parallel()
	e := setup(t, uploads.Config{TTL: time.Hour})
	ctx := context.Background()
	gone := e.create("ann", "gone.txt", 4)
	if r := e.do("DELETE", gone, "ann", map[string]string{"Tus-Resumable": "1.0.0"}, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(e.file(gone)); !os.IsNotExist(err) {
		t.Fatalf("bytes of a terminated upload: %v", err)
	}
	if r := e.head("ann", gone); r.status != http.StatusNotFound {
		t.Fatalf("HEAD after DELETE: %d", r.status)
	}

	kept := e.create("ann", "kept.txt", 4)
	if r := e.patch("ann", kept, 0, []byte("keep")); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	res, err := e.store.Submit(ctx, task.SubmitRequest{UserID: "ann", TaskID: newID(), ConversationID: newID(),
		Content: "look", Attachments: []string{path.Base(kept)}})
	if err != nil || !res.Created {
		t.Fatalf("attach: %v", err)
	}
	if r := e.do("DELETE", kept, "ann", map[string]string{"Tus-Resumable": "1.0.0"}, nil); r.status != http.StatusConflict {
		t.Fatalf("DELETE of an attached upload: %d %s", r.status, r.body)
	}
	stale := e.create("ann", "stale.txt", 4)
	if r := e.patch("ann", stale, 0, []byte("ab")); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	e.clock.Advance(59 * time.Minute)
	if r := e.patch("ann", stale, 2, []byte("c")); r.status != http.StatusNoContent {
		t.Fatal(r.status) // activity moves the expiry
	}
	e.clock.Advance(59 * time.Minute)
	if n, err := e.svc.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v (the terminated upload only)", n, err)
	}
	if r := e.head("ann", stale); r.status != http.StatusOK {
		t.Fatalf("upload written 59 minutes ago: %d", r.status)
	}
	e.clock.Advance(2 * time.Minute)
	if r := e.head("ann", stale); r.status != http.StatusNotFound {
		t.Fatalf("expired upload: HEAD %d", r.status)
	}
	if n, err := e.svc.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if _, err := os.Stat(e.file(stale)); !os.IsNotExist(err) {
		t.Fatalf("bytes of an expired upload: %v", err)
	}
	if _, err := os.Stat(e.file(kept)); err != nil {
		t.Fatalf("bytes of an attached upload: %v", err)
	}
	if n := e.rows(`SELECT count(*) FROM uploads`); n != 1 {
		t.Fatalf("%d upload rows, want the attached one", n)
	}
}

// TestDownload: the owner gets the bytes with the name (any name, safely)
// and type; ranges work; text files keep their text for the runner.
func TestDownload(t *testing.T) {
	t.Parallel()
	e := setup(t, uploads.Config{})
	name := `résumé "final"; v2.txt`
	r := e.do("POST", "/v1/uploads/", "ann", map[string]string{
		"Tus-Resumable": "1.0.0", "Upload-Length": "11",
		"Upload-Metadata": metadata("filename", name, "filetype", "text/plain; charset=utf-8"),
		"Content-Type":    "application/offset+octet-stream",
	}, []byte("hello world"))
	if r.status != http.StatusCreated || r.header.Get("Upload-Offset") != "11" {
		t.Fatalf("creation with upload: %d %v %s", r.status, r.header, r.body)
	}
	p := r.header.Get("Location")
	dl := e.do("GET", p, "ann", nil, nil)
	if dl.status != http.StatusOK || string(dl.body) != "hello world" {
		t.Fatalf("download: %d %q", dl.status, dl.body)
	}
	if ct := dl.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	cd := dl.header.Get("Content-Disposition")
	if cd != `attachment; filename="r_sum_ _final_; v2.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22%3B%20v2.txt` {
		t.Fatalf("Content-Disposition %q", cd)
	}
	if n, _ := url.PathUnescape(strings.SplitN(cd, "''", 2)[1]); n != name {
		t.Fatalf("filename* decodes to %q", n)
	}
	if dl.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(dl.header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("headers: %v", dl.header)
	}
	part := e.do("GET", p, "ann", map[string]string{"Range": "bytes=6-"}, nil)
	if part.status != http.StatusPartialContent || string(part.body) != "world" {
		t.Fatalf("range: %d %q", part.status, part.body)
	}
	var text string
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT text FROM uploads WHERE id = $1`, path.Base(p)).Scan(&text); err != nil || text != "hello world" {
		t.Fatalf("stored text %q %v", text, err)
	}
}

// TestBytesInButNotFinished: a gateway that stopped between storing the
// last byte and marking the upload finished leaves it complete but
// unfinished; the next request finishes it.
func TestBytesInButNotFinished(t *testing.T) {
	t.Parallel()
	e := setup(t, uploads.Config{})
	ctx := context.Background()
	p := e.create("ann", "x.bin", 3)
	id := path.Base(p)
	if _, err := e.dir.Write(ctx, id, 0, strings.NewReader("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.AdvanceUpload(ctx, id, 0, 3, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if off := e.offset("ann", p); off != 3 {
		t.Fatalf("offset %d", off)
	}
	u, err := e.store.Upload(ctx, "ann", id)
	if err != nil || !u.Finished || u.SHA256 != sum([]byte("abc")) {
		t.Fatalf("after HEAD: %+v %v", u, err)
	}
}

func TestContentDispositionIsOneHeaderLine(t *testing.T) {
	for _, name := range []string{"a\r\nX-Evil: 1", "日本.txt", `q"uote\`, "tab\t"} {
		cd := uploads.ContentDisposition(name)
		if strings.ContainsAny(cd, "\r\n\t") || strings.Count(cd, `"`) != 2 {
			t.Fatalf("%q -> %q", name, cd)
		}
	}
}
