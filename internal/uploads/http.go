package uploads

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// Serve answers a request under /v1/uploads for user, whom the caller has
// authenticated (and whose Origin it has checked on writes):
//
//	POST   /v1/uploads/       tus creation (and creation-with-upload)
//	HEAD   /v1/uploads/{id}   the offset to resume from
//	PATCH  /v1/uploads/{id}   more bytes at that offset
//	DELETE /v1/uploads/{id}   tus termination
//	GET    /v1/uploads/{id}   the bytes of a finished upload
//	OPTIONS                   tus discovery (needs no user)
//
// Errors have Tether's JSON body ({"error":{"code","message"}}), tusd's own
// included, and the Location of a new upload is a path, so it is right
// behind any proxy.
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, user string) {
	id, isItem, ok := splitPath(r.URL.Path)
	if !ok {
		writeError(w, r, task.Errorf(task.CodeNotFound, "no such endpoint"))
		return
	}
	if r.Method == http.MethodGet && isItem {
		s.download(w, r, user, id)
		return
	}
	switch {
	case r.Method == http.MethodOptions,
		r.Method == http.MethodPost && !isItem,
		(r.Method == http.MethodHead || r.Method == http.MethodPatch || r.Method == http.MethodDelete) && isItem:
	default:
		writeJSON(w, r, http.StatusMethodNotAllowed, protocol.HTTPError(task.CodeInvalid,
			"method "+r.Method+" not allowed here"))
		return
	}
	jw := &jsonErrors{ResponseWriter: w, method: r.Method}
	r = r.WithContext(withUser(r.Context(), user))
	s.tus.Middleware(http.HandlerFunc(s.tusRoute)).ServeHTTP(jw, r)
	jw.finish()
}

// tusRoute runs after tusd's middleware, which may have changed the method
// (X-HTTP-Method-Override).
func (s *Service) tusRoute(w http.ResponseWriter, r *http.Request) {
	id, isItem, _ := splitPath(r.URL.Path)
	// tusd reads the id from a path with the base path taken off, as
	// http.StripPrefix leaves it.
	r2 := *r
	u := *r.URL
	u.Path, u.RawPath = id, ""
	r2.URL = &u
	r = &r2
	switch {
	case r.Method == http.MethodPost && !isItem:
		s.tus.PostFile(w, r)
	case r.Method == http.MethodHead && isItem:
		s.tus.HeadFile(w, r)
	case r.Method == http.MethodPatch && isItem:
		s.tus.PatchFile(w, r)
	case r.Method == http.MethodDelete && isItem:
		s.tus.DelFile(w, r)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = w.Write([]byte("invalid: method " + r.Method + " not allowed here\n"))
	}
}

// splitPath reads /v1/uploads, /v1/uploads/ (the collection) or
// /v1/uploads/{id} (an item).
func splitPath(p string) (id string, isItem, ok bool) {
	rest, found := strings.CutPrefix(p, strings.TrimSuffix(BasePath, "/"))
	switch {
	case !found:
		return "", false, false
	case rest == "" || rest == "/":
		return "", false, true
	}
	id = strings.TrimPrefix(rest, "/")
	if id == "" || strings.Contains(id, "/") {
		return "", false, false
	}
	return id, true, true
}

// download serves a finished upload's bytes to its owner, as an attachment
// with its name and type. Ranges and conditional requests work (the ETag is
// its SHA-256). It is never rendered by the browser in the page's origin:
// Content-Disposition is attachment, sniffing is off, and a sandbox CSP
// applies should anything render it anyway.
func (s *Service) download(w http.ResponseWriter, r *http.Request, user, id string) {
	u, err := s.store.Upload(r.Context(), user, id)
	if err != nil {
		if task.ErrorCode(err) == task.CodeInternal {
			s.log.Error("download", "upload", id, "err", err)
		}
		writeError(w, r, err)
		return
	}
	if !u.Finished {
		writeError(w, r, task.Errorf(task.CodeConflict, "upload not finished: %d of %d bytes", u.Offset, u.Size))
		return
	}
	f, err := s.blobs.Open(r.Context(), u.ID)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, r, task.Errorf(task.CodeNotFound, "upload not found"))
		return
	}
	if err != nil {
		s.log.Error("download", "upload", id, "err", err)
		writeError(w, r, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", u.Type)
	h.Set("Content-Disposition", ContentDisposition(u.Name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	h.Set("ETag", `"`+u.SHA256+`"`)
	http.ServeContent(w, r, "", u.CreatedAt, f)
}

// ContentDisposition is an attachment header that is safe for any name: an
// ASCII fallback (filename, quoted, with every other byte as _) and the
// exact name in RFC 5987 form (filename*).
func ContentDisposition(name string) string {
	var ascii strings.Builder
	for _, r := range name {
		switch {
		case r < 0x20 || r >= 0x7f || r == '"' || r == '\\':
			ascii.WriteByte('_')
		default:
			ascii.WriteRune(r)
		}
	}
	return `attachment; filename="` + ascii.String() + `"; filename*=UTF-8''` + rfc5987(name)
}

// rfc5987 percent-encodes everything but RFC 5987's attr-char.
func rfc5987(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// writeError answers err with its code's status; an unavailable answer
// says when to try again.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := task.ErrorCode(err)
	protocol.SetRetryAfter(w.Header(), code)
	writeJSON(w, r, protocol.HTTPStatus(code), protocol.HTTPError(code, task.ErrorMessage(err)))
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// jsonErrors turns tusd's plain-text error responses ("ERR_CODE: message")
// into Tether's JSON error body, and a Location URL into its path.
type jsonErrors struct {
	http.ResponseWriter
	method string
	status int
	held   bool
	body   []byte
}

// Unwrap lets tusd's http.ResponseController reach the connection (it sets
// read deadlines while a body streams in).
func (w *jsonErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *jsonErrors) WriteHeader(status int) {
	h := w.Header()
	if loc := h.Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil && u.IsAbs() {
			h.Set("Location", u.EscapedPath())
		}
	}
	if status >= 400 && strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		w.status, w.held = status, true
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *jsonErrors) Write(b []byte) (int, error) {
	if w.held {
		w.body = append(w.body, b...)
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// finish writes a held error as JSON.
func (w *jsonErrors) finish() {
	if !w.held {
		return
	}
	w.held = false
	tag, msg, found := strings.Cut(strings.TrimSpace(string(w.body)), ": ")
	if !found {
		tag, msg = "", strings.TrimSpace(string(w.body))
	}
	code := codeOf(tag, w.status)
	if code == task.CodeInternal {
		msg = "internal error" // tusd's own 500s carry Go error text
	}
	if msg == "" {
		msg = http.StatusText(w.status)
	}
	body := protocol.HTTPError(code, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	protocol.SetRetryAfter(h, code)
	w.ResponseWriter.WriteHeader(w.status)
	if w.method != http.MethodHead {
		_, _ = w.ResponseWriter.Write(body)
	}
}

// codeOf is the error code of a tusd error: ours when the tag is one of
// PROTOCOL.md's codes, else by HTTP status.
func codeOf(tag string, status int) task.Code {
	switch c := task.Code(tag); c {
	case task.CodeInvalid, task.CodeUnauthorized, task.CodeForbidden, task.CodeNotFound,
		task.CodeConflict, task.CodeRateLimited, task.CodeTooLarge, task.CodeUnavailable, task.CodeInternal:
		return c
	}
	switch status {
	case http.StatusUnauthorized:
		return task.CodeUnauthorized
	case http.StatusForbidden:
		return task.CodeForbidden
	case http.StatusNotFound, http.StatusGone:
		return task.CodeNotFound
	case http.StatusConflict, http.StatusLocked:
		return task.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return task.CodeTooLarge
	case http.StatusTooManyRequests:
		return task.CodeRateLimited
	case http.StatusServiceUnavailable:
		return task.CodeUnavailable
	}
	if status >= 500 {
		return task.CodeInternal
	}
	return task.CodeInvalid
}
