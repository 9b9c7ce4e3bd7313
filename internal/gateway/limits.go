package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// The limits of PROTOCOL.md section 9 that are the gateway's: open tabs per
// user, new connections per client IP, idle keep-alive connections, a tab's
// subscriptions and pending requests (ws.go), a subscription's buffer
// (follow.go) and a tab's queue (outbox.go). Each refusal is an error with a
// code and a message, and a count in tether_gateway_limit_refusals_total.

// Names of the limit label.
const (
	limitTabs          = "tabs_per_user"
	limitConnRate      = "conn_rate"
	limitSubscriptions = "subscriptions"
	limitPending       = "pending_requests"
	limitRetries       = "retries"
	limitFollowBuffer  = "subscription_buffer"
)

// requestTimeout bounds reading an API request's body and writing its
// answer, so a client that trickles a body or stops reading does not hold a
// connection; streams (WebSocket, SSE) have their own per-write deadlines.
const requestTimeout = 30 * time.Second

// tabCounter counts each user's open tabs (WebSocket and SSE) on this gateway.
type tabCounter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newTabCounter(max int) *tabCounter { return &tabCounter{max: max, n: map[string]int{}} }

// acquire takes a place for one more tab of user, or reports false at the limit.
func (c *tabCounter) acquire(user string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user] >= c.max {
		return false
	}
	c.n[user]++
	return true
}

func (c *tabCounter) release(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user] <= 1 {
		delete(c.n, user)
		return
	}
	c.n[user]--
}

// openTab takes a tab's place for user, or answers 429 and reports false.
// The caller releases it with s.tabs.release.
func (s *Server) openTab(w http.ResponseWriter, user string) bool {
	if s.tabs.acquire(user) {
		return true
	}
	s.metrics.limitRefusals.WithLabelValues(limitTabs).Inc()
	writeError(w, task.Errorf(task.CodeRateLimited,
		"too many open tabs for this user on this server (%d); close some", s.cfg.MaxTabsPerUser))
	return false
}

// HTTPServer returns the http.Server to serve this gateway with: header and
// idle keep-alive timeouts, and the per-connection state the per-IP
// connection limit needs. No server-wide ReadTimeout or WriteTimeout: they
// would end WebSocket and SSE streams; API requests set their own deadlines.
func (s *Server) HTTPServer(idleTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ConnContext:       s.ConnContext,
	}
}

type connKey struct{}

// connState is one TCP connection's admission by the per-IP limit, decided
// on its first request.
type connState struct {
	once    sync.Once
	allowed bool
}

// ConnContext marks each new connection so the per-IP connection limit
// counts connections rather than requests (http.Server.ConnContext).
func (s *Server) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connState{})
}

// admit applies the per-IP limit of new connections (TETHER_CONN_RATE). A
// direct client's connection is counted once, on its first request; behind
// a trusted proxy, which keeps its own connections open, every WebSocket
// upgrade and SSE stream counts as a new connection of the forwarded client
// address. A refused connection gets 429 and is closed.
func (s *Server) admit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs, ok := r.Context().Value(connKey{}).(*connState)
		if s.conns == nil || !ok {
			next.ServeHTTP(w, r)
			return
		}
		allowed := true
		if peer := peerAddr(r); trusted(peer, s.cfg.TrustedProxies) {
			if isStream(r) {
				allowed = s.conns.allow(clientIP(r, s.cfg.TrustedProxies).String())
			}
		} else {
			cs.once.Do(func() { cs.allowed = s.conns.allow(peer.String()) })
			allowed = cs.allowed
		}
		if !allowed {
			s.metrics.limitRefusals.WithLabelValues(limitConnRate).Inc()
			w.Header().Set("Connection", "close")
			writeError(w, task.Errorf(task.CodeRateLimited, "too many new connections from your address; slow down"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isStream: a WebSocket upgrade or an SSE stream.
func isStream(r *http.Request) bool {
	return r.URL.Path == "/v1/ws" || strings.HasPrefix(r.URL.Path, "/v1/tasks/") && strings.HasSuffix(r.URL.Path, "/events")
}
