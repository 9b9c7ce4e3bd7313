package gateway

import (
	"net/http"
	"strings"

	"github.com/tether-dev/tether/internal/task"
)

// CORS (PROTOCOL.md section 11) lets a page on another allowed origin (an app
// built on the OpenAI SDK or the AI SDK's useChat) call every HTTP endpoint
// with credentials. The allowed origins are the same list that guards
// WebSocket upgrades and cookie writes; any other origin gets no CORS header,
// so the browser hides the answer from it, and its cookie writes are still
// refused by the Origin check.

// corsRequestHeaders are the request headers a preflight may ask for: what
// the OpenAI SDKs, the AI SDK's transport, EventSource and tus-js-client send.
var corsRequestHeaders = map[string]bool{
	"authorization": true, "content-type": true, "idempotency-key": true, "last-event-id": true,
	"accept": true, "cache-control": true, "x-requested-with": true,
	"tus-resumable": true, "upload-length": true, "upload-offset": true, "upload-metadata": true,
	"upload-defer-length": true, "upload-concat": true,
}

// corsHeaderAllowed reports whether a preflight may allow header h (lower case).
func corsHeaderAllowed(h string) bool {
	return corsRequestHeaders[h] || strings.HasPrefix(h, "x-stainless-") || strings.HasPrefix(h, "openai-")
}

const (
	corsMethods = "GET, POST, PATCH, DELETE, HEAD, OPTIONS"
	corsExpose  = "Location, Upload-Offset, Upload-Length, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Retry-After"
	corsMaxAge  = "600"
)

// cors answers preflights and marks the answers to allowed origins.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		allowed := originAllowed(origin, s.cfg.AllowedOrigins, r.Host)
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !allowed {
				writeError(w, task.Errorf(task.CodeForbidden, "origin not allowed"))
				return
			}
			asked := r.Header.Get("Access-Control-Request-Headers")
			var ok []string
			for _, f := range strings.Split(asked, ",") {
				if f = strings.ToLower(strings.TrimSpace(f)); f != "" && corsHeaderAllowed(f) {
					ok = append(ok, f)
				}
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", corsMethods)
			if len(ok) > 0 {
				h.Set("Access-Control-Allow-Headers", strings.Join(ok, ", "))
			}
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Expose-Headers", corsExpose)
		}
		next.ServeHTTP(w, r)
	})
}
