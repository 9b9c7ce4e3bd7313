package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/uploads"
)

// lazyUploads lets the harness's gateway serve uploads on the store the
// harness makes (it exists only once setup has started).
type lazyUploads struct {
	svc atomic.Pointer[uploads.Service]
	dir *uploads.Dir
}

func (l *lazyUploads) Serve(w http.ResponseWriter, r *http.Request, user string) {
	l.svc.Load().Serve(w, r, user)
}

func (l *lazyUploads) Sweep(ctx context.Context) (int, error) { return l.svc.Load().Sweep(ctx) }

// withUploads gives the env's gateway the upload service on a temporary
// directory.
func withUploads(t testing.TB, lu *lazyUploads) func(*envOptions) {
	dir, err := uploads.NewDir(filepath.Join(t.TempDir(), "uploads"))
	if err != nil {
		t.Fatal(err)
	}
	lu.dir = dir
	return withUploadsOn(t, lu, dir, 8<<20)
}

// withUploadsOn gives the env's gateway the upload service on blobs.
func withUploadsOn(t testing.TB, lu *lazyUploads, blobs uploads.Blobs, maxSize int64) func(*envOptions) {
	return func(o *envOptions) {
		o.gateway.Uploads = lu
		prev := o.wrapStore
		o.wrapStore = func(e *env, s task.Store) task.Store {
			svc, err := uploads.New(uploads.Config{MaxSize: maxSize}, e.store, blobs)
			if err != nil {
				t.Fatal(err)
			}
			lu.svc.Store(svc)
			if prev != nil {
				return prev(e, s)
			}
			return s
		}
	}
}

// upload sends data as a tus upload (creation, then one PATCH) with the
// given headers for auth, and returns the upload's path.
func upload(t testing.TB, base string, auth http.Header, name string, data []byte) string {
	t.Helper()
	meta := "filename " + base64.StdEncoding.EncodeToString([]byte(name)) + ",filetype " +
		base64.StdEncoding.EncodeToString([]byte("text/plain"))
	resp := tusDo(t, "POST", base+"/v1/uploads/", auth, map[string]string{
		"Upload-Length": strconv.Itoa(len(data)), "Upload-Metadata": meta}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	p := resp.Header.Get("Location")
	resp = tusDo(t, "PATCH", base+p, auth, map[string]string{
		"Content-Type": "application/offset+octet-stream", "Upload-Offset": "0"}, data)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH: %d", resp.StatusCode)
	}
	return p
}

func tusDo(t testing.TB, method, url string, auth http.Header, h map[string]string, body []byte) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range auth {
		req.Header[k] = vs
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (e *env) bearer(user string) http.Header {
	return http.Header{"Authorization": {"Bearer " + e.token(user, time.Hour)}}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestAttachmentsEndToEnd: files uploaded through the gateway are attached
// to a submit over WebSocket, listed in history, and read by the runner:
// the demo engine's /attachments names each one's SHA-256.
func TestAttachmentsEndToEnd(t *testing.T) {
	t.Parallel()
	lu := &lazyUploads{}
	e := setup(t, withUploads(t, lu))
	first := make([]byte, 3<<20)
	if _, err := rand.Read(first); err != nil {
		t.Fatal(err)
	}
	second := []byte("plain text notes\n")
	p1 := upload(t, e.srv.URL, e.bearer("ann"), "photo one.jpg", first)
	p2 := upload(t, e.srv.URL, e.bearer("ann"), "notes.txt", second)
	id1, id2 := path.Base(p1), path.Base(p2)

	tb := e.dial("ann")
	taskID, convID := newID(), newID()
	sub := map[string]any{"type": "submit", "task_id": taskID, "conversation_id": convID,
		"content": "/attachments", "attachments": []string{id1, id2}}
	if r := tb.call(sub); r.Type != "submitted" {
		t.Fatalf("submit: %s", r.raw)
	}
	f := &follower{taskID: taskID}
	for !f.apply(tb.next()) {
	}
	want := fmt.Sprintf("photo one.jpg %d %s\nnotes.txt %d %s", len(first), sha(first), len(second), sha(second))
	if f.status != "done" || f.output() != want {
		t.Fatalf("answer (%s): %q\nwant %q", f.status, f.output(), want)
	}
	// The same submit again is a lookup; with other attachments a conflict.
	if r := tb.call(sub); r.Type != "submitted" || r.Created == nil || *r.Created {
		t.Fatalf("repeat: %s", r.raw)
	}
	sub["attachments"] = []string{id2, id1}
	if r := tb.call(sub); r.Type != "error" || r.Code != "conflict" {
		t.Fatalf("other attachments: %s", r.raw)
	}

	h := tb.call(map[string]any{"type": "history", "conversation_id": convID})
	if len(h.Messages) != 2 {
		t.Fatalf("history: %s", h.raw)
	}
	wantAtt := []task.Attachment{{ID: id1, Name: "photo one.jpg", Size: int64(len(first)), Type: "text/plain"},
		{ID: id2, Name: "notes.txt", Size: int64(len(second)), Type: "text/plain"}}
	if got := h.Messages[0].Attachments; len(got) != 2 || got[0] != wantAtt[0] || got[1] != wantAtt[1] {
		t.Fatalf("user message attachments: %+v", got)
	}
	if !strings.Contains(h.raw, `"attachments":[]`) {
		t.Fatalf("the answer carries no empty attachments list: %s", h.raw)
	}

	// Without attachments the same directive says so.
	r := tb.call(map[string]any{"type": "submit", "task_id": newID(), "conversation_id": convID, "content": "/attachments"})
	f = &follower{taskID: r.Task.ID}
	f.apply(r)
	for !f.apply(tb.next()) {
	}
	if f.output() != "no attachments" {
		t.Fatalf("no attachments: %q", f.output())
	}

	// The owner downloads the bytes; another user cannot.
	resp, err := http.DefaultClient.Do(func() *http.Request {
		req, _ := http.NewRequest("GET", e.srv.URL+p1, nil)
		req.Header = e.bearer("ann")
		return req
	}())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || sha(got) != sha(first) {
		t.Fatalf("download: %d, sha %s", resp.StatusCode, sha(got))
	}
	if code, out := e.httpDo("GET", p1, "bob", nil); code != http.StatusNotFound || errCode(out) != "not_found" {
		t.Fatalf("bob's download: %d %v", code, out)
	}
}

// TestFilesWithoutTextEndToEnd: a message may be its files alone, over
// WebSocket and HTTP; the demo engine answers it with the files it read; a
// regenerate of that turn sends the same uploads again; empty content
// without files stays invalid.
func TestFilesWithoutTextEndToEnd(t *testing.T) {
	t.Parallel()
	lu := &lazyUploads{}
	e := setup(t, withUploads(t, lu))
	notes := []byte("plain text notes\n")
	id := path.Base(upload(t, e.srv.URL, e.bearer("ann"), "notes.txt", notes))
	want := fmt.Sprintf("notes.txt %d %s", len(notes), sha(notes))

	tb := e.dial("ann")
	answer := func(sub map[string]any) string {
		t.Helper()
		r := tb.call(sub)
		if r.Type != "submitted" {
			t.Fatalf("submit %v: %s", sub, r.raw)
		}
		f := &follower{taskID: r.Task.ID}
		f.apply(r)
		for !f.apply(tb.next()) {
		}
		if f.status != "done" {
			t.Fatalf("answer of %v: %s %q", sub, f.status, f.output())
		}
		return f.output()
	}
	first, convID := newID(), newID()
	if got := answer(map[string]any{"type": "submit", "task_id": first, "conversation_id": convID,
		"content": "", "attachments": []string{id}}); got != want {
		t.Fatalf("files alone: %q, want %q", got, want)
	}
	if got := answer(map[string]any{"type": "submit", "task_id": newID(), "conversation_id": convID,
		"content": "", "attachments": []string{id}, "version_of": first}); got != want {
		t.Fatalf("regenerated: %q, want %q", got, want)
	}
	if r := tb.call(map[string]any{"type": "submit", "task_id": newID(), "conversation_id": convID, "content": ""}); r.Type != "error" || r.Code != "invalid" {
		t.Fatalf("empty without files: %s", r.raw)
	}
	h := tb.call(map[string]any{"type": "history", "conversation_id": convID})
	if len(h.Messages) != 4 || h.Messages[0].Content != "" || len(h.Messages[0].Attachments) != 1 ||
		len(h.Messages[2].Attachments) != 1 || h.Messages[2].Attachments[0].ID != id {
		t.Fatalf("history: %s", h.raw)
	}

	// HTTP has the same rule; another conversation cannot send the upload.
	if code, out := e.httpDo("POST", "/v1/tasks", "ann", map[string]any{"task_id": newID(),
		"conversation_id": newID(), "content": ""}); code != http.StatusBadRequest || errCode(out) != "invalid" {
		t.Fatalf("POST empty without files: %d %v", code, out)
	}
	if code, out := e.httpDo("POST", "/v1/tasks", "ann", map[string]any{"task_id": newID(),
		"conversation_id": newID(), "content": "", "attachments": []string{id}}); code != http.StatusBadRequest || errCode(out) != "invalid" {
		t.Fatalf("POST the upload into another conversation: %d %v", code, out)
	}
	if code, out := e.httpDo("POST", "/v1/tasks", "ann", map[string]any{"task_id": newID(),
		"conversation_id": convID, "content": "", "attachments": []string{id}}); code != http.StatusCreated {
		t.Fatalf("POST files alone: %d %v", code, out)
	}
}

// TestAttachmentsRefused: bad attachments are invalid over HTTP and nothing
// is created; an upload without credentials is 401.
func TestAttachmentsRefused(t *testing.T) {
	t.Parallel()
	lu := &lazyUploads{}
	e := setup(t, withUploads(t, lu), func(o *envOptions) { o.noRunner = true })
	done := path.Base(upload(t, e.srv.URL, e.bearer("ann"), "a.txt", []byte("a")))
	bobs := path.Base(upload(t, e.srv.URL, e.bearer("bob"), "b.txt", []byte("b")))
	resp := tusDo(t, "POST", e.srv.URL+"/v1/uploads/", e.bearer("ann"), map[string]string{
		"Upload-Length": "10", "Upload-Metadata": "filename " + base64.StdEncoding.EncodeToString([]byte("half.txt"))}, nil)
	half := path.Base(resp.Header.Get("Location"))
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = newID()
	}
	for name, ids := range map[string][]string{
		"missing": {newID()}, "foreign": {bobs}, "unfinished": {half}, "eleven": eleven,
		"twice": {done, strings.ToUpper(done)}, "not an id": {"x"},
	} {
		code, out := e.httpDo("POST", "/v1/tasks", "ann", map[string]any{"task_id": newID(),
			"conversation_id": newID(), "content": "look", "attachments": ids})
		if code != http.StatusBadRequest || errCode(out) != "invalid" {
			t.Fatalf("%s: %d %v", name, code, out)
		}
	}
	var n int
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tasks created by refused submits (%v)", n, err)
	}
	taskID, convID := newID(), newID()
	body := map[string]any{"task_id": taskID, "conversation_id": convID, "content": "look", "attachments": []string{done}}
	if code, out := e.httpDo("POST", "/v1/tasks", "ann", body); code != http.StatusCreated {
		t.Fatalf("POST with an attachment: %d %v", code, out)
	}
	body["attachments"] = []string{}
	if code, out := e.httpDo("POST", "/v1/tasks", "ann", body); code != http.StatusConflict || errCode(out) != "conflict" {
		t.Fatalf("POST again without it: %d %v", code, out)
	}
	if resp := tusDo(t, "POST", e.srv.URL+"/v1/uploads/", nil, map[string]string{"Upload-Length": "1"}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upload without credentials: %d", resp.StatusCode)
	}
	if resp := tusDo(t, "OPTIONS", e.srv.URL+"/v1/uploads/", nil, nil, nil); resp.Header.Get("Tus-Max-Size") != strconv.Itoa(8<<20) {
		t.Fatalf("OPTIONS: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestUploadsCookieOrigin: a cookie-authenticated upload write needs an
// allowed Origin; a missing or foreign one is 403 and stores nothing.
func TestUploadsCookieOrigin(t *testing.T) {
	t.Parallel()
	lu := &lazyUploads{}
	e := setup(t, withUploads(t, lu), func(o *envOptions) { o.anonymous = true; o.noRunner = true })
	resp, err := http.Get(e.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie string
	for _, c := range resp.Cookies() {
		cookie = c.Name + "=" + c.Value
	}
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	meta := "filename " + base64.StdEncoding.EncodeToString([]byte("c.txt"))
	for origin, want := range map[string]int{"": 403, "http://evil.example": 403, e.srv.URL: 201} {
		h := http.Header{"Cookie": {cookie}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		resp := tusDo(t, "POST", e.srv.URL+"/v1/uploads/", h, map[string]string{"Upload-Length": "1", "Upload-Metadata": meta}, nil)
		if resp.StatusCode != want {
			t.Fatalf("Origin %q: %d, want %d", origin, resp.StatusCode, want)
		}
	}
	var n int
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM uploads`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d uploads stored (%v), want the allowed one", n, err)
	}
}

// TestDeleteConversation: DELETE /v1/conversations/{id} cancels the answer
// in progress (every tab sees it end), removes the conversation's messages,
// tasks and uploads with their bytes, and answers not_found to anyone else.
func TestDeleteConversation(t *testing.T) {
	t.Parallel()
	lu := &lazyUploads{}
	e := setup(t, withUploads(t, lu))
	p := upload(t, e.srv.URL, e.bearer("ann"), "a.txt", []byte("alpha"))
	id := path.Base(p)
	file := filepath.Join(lu.dir.Root(), id[:2], id)

	tb := e.dial("ann")
	taskID, convID := newID(), newID()
	r := tb.call(map[string]any{"type": "submit", "task_id": taskID, "conversation_id": convID,
		"content": "/stream 1000 20", "attachments": []string{id}})
	if r.Type != "submitted" {
		t.Fatalf("submit: %s", r.raw)
	}
	tb.until(func(f frame) bool { return f.Type == "delta" && f.TaskID == taskID })

	if code, out := e.httpDo("DELETE", "/v1/conversations/"+convID, "bob", nil); code != http.StatusNotFound || errCode(out) != "not_found" {
		t.Fatalf("bob's delete: %d %v", code, out)
	}
	if code, out := e.httpDo("DELETE", "/v1/conversations/not-a-uuid", "ann", nil); code != http.StatusBadRequest {
		t.Fatalf("bad id: %d %v", code, out)
	}
	if code, out := e.httpDo("DELETE", "/v1/conversations/"+convID, "ann", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %v", code, out)
	}
	end := tb.until(func(f frame) bool { return f.Type == "status" && f.TaskID == taskID && isTerminal(f.Status) })
	if end.Status != "cancelled" {
		t.Fatalf("the running answer ended %s", end.Status)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the upload's bytes: %v", err)
	}
	if code, _ := e.httpDo("GET", "/v1/conversations/"+convID+"/messages", "ann", nil); code != http.StatusNotFound {
		t.Fatalf("history after delete: %d", code)
	}
	if code, _ := e.httpDo("GET", "/v1/tasks/"+taskID, "ann", nil); code != http.StatusNotFound {
		t.Fatalf("task after delete: %d", code)
	}
	if code, _ := e.httpDo("GET", p, "ann", nil); code != http.StatusNotFound {
		t.Fatalf("upload after delete: %d", code)
	}
	if code, _ := e.httpDo("DELETE", "/v1/conversations/"+convID, "ann", nil); code != http.StatusNotFound {
		t.Fatalf("second delete: %d", code)
	}
	if code, out := e.httpDo("PUT", "/v1/conversations/"+convID, "ann", nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d %v", code, out)
	}
}
