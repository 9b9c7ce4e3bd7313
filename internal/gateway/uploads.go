package gateway

import (
	"context"
	"net/http"

	"github.com/tether-dev/tether/internal/task"
)

// Uploads serves the tus protocol and downloads under /v1/uploads
// (PROTOCOL.md section 10) for a user the gateway has authenticated;
// internal/uploads implements it.
type Uploads interface {
	Serve(w http.ResponseWriter, r *http.Request, user string)
	// Sweep removes expired and discarded uploads with their bytes.
	Sweep(ctx context.Context) (int, error)
}

// serveUploads puts Tether's auth in front of the upload service: a bearer
// token or the session cookie, and for a cookie-authenticated write (POST,
// PATCH, DELETE) an allowed Origin, missing or foreign being refused (403)
// like every cookie write. OPTIONS is tus discovery (the limits and
// extensions) and needs no user.
func (s *Server) serveUploads(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Uploads == nil {
		writeError(w, task.Errorf(task.CodeNotFound, "uploads are not enabled on this server"))
		return
	}
	if r.Method == http.MethodOptions {
		s.cfg.Uploads.Serve(w, r, "")
		return
	}
	id, err := s.auth.authenticate(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	if id.viaCookie && r.Method != http.MethodGet && r.Method != http.MethodHead {
		if o := r.Header.Get("Origin"); o == "" || !originAllowed(o, s.cfg.AllowedOrigins, r.Host) {
			writeError(w, task.Errorf(task.CodeForbidden, "a cookie-authenticated write needs an allowed Origin"))
			return
		}
	}
	if id.newCookie != nil {
		http.SetCookie(w, id.newCookie)
	}
	if !s.limit.allow(id.user) {
		s.metrics.rateLimited.Inc()
		writeError(w, task.Errorf(task.CodeRateLimited, "too many requests; slow down"))
		return
	}
	s.cfg.Uploads.Serve(w, r, id.user)
}
