// Package gateway terminates WebSocket, SSE and HTTP for browser tabs and
// other clients (PROTOCOL.md sections 1, 4 and 5): it authenticates, creates
// and cancels tasks through the store, and fans task events from the bus out
// to every attached tab with the resume rule of DESIGN.md.
//
// It depends on two interfaces that say all it needs, task.Store and Bus
// (no feature is found by a type assertion, so a wrapped or fake store has
// them all); cmd/gateway wires Postgres and NATS (natsgateway). The hub and
// user hub hold no lock across a bus call, and every goroutine a tab or
// stream starts is counted, so Shutdown waits for all of them.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// Config tunes a gateway. The zero value works: anonymous auth, no rate
// limit, the gateway's own host as the only allowed Origin.
type Config struct {
	// AllowedOrigins are exact origins allowed for WebSocket upgrades and
	// cookie-authenticated writes; empty means the gateway's own host.
	AllowedOrigins []string
	// TrustedProxies are the peers whose X-Forwarded-For and
	// X-Forwarded-Proto are believed (the client's IP, and whether it used
	// TLS). Default: none.
	TrustedProxies []netip.Prefix
	// AuthSecret is the HS256 secret. With neither it nor Keys, anonymous
	// cookie mode.
	AuthSecret []byte
	// Keys verifies the JWTs identity providers sign (every alg but HS256);
	// nil: only HS256 tokens, when AuthSecret is set.
	Keys KeySet
	// JWTAudience and JWTIssuer, when set, must be a token's aud (one of)
	// and iss.
	JWTAudience, JWTIssuer string
	// CookieKey signs anonymous session cookies; keep it stable across
	// restarts (and equal on every gateway) or anonymous users lose their data.
	CookieKey []byte
	// SessionTTL is how long an anonymous cookie lives after it was last
	// renewed; it is renewed once a day while used. Default
	// DefaultSessionTTL (30 days).
	SessionTTL time.Duration
	// Rate is client messages and HTTP requests per second per user; 0 = no limit.
	Rate float64
	// ConnRate is new connections per second per client IP (burst twice
	// that); 0 = no limit. It takes effect through HTTPServer's ConnContext.
	ConnRate float64
	// MaxTabsPerUser bounds a user's open WebSocket and SSE connections on
	// this gateway. Default DefaultMaxTabsPerUser (64).
	MaxTabsPerUser int
	// MaxPending bounds a tab's requests waiting or running, cancels
	// included. Default DefaultMaxPending (64).
	MaxPending int
	// QueueBytes bounds a connection's outgoing queue (at least 1 MiB).
	// Default DefaultQueueBytes (4 MiB).
	QueueBytes int
	// PingInterval is how often tabs are pinged; PongTimeout how long a ping
	// may go unanswered before the tab is dropped.
	PingInterval time.Duration
	PongTimeout  time.Duration
	// WriteTimeout bounds one WebSocket write.
	WriteTimeout time.Duration
	// CancelWait is how long a cancel of a running task waits for its runner
	// to write the cancelled status before replying with the task as it stands.
	CancelWait time.Duration
	// SSEKeepAlive is the period of SSE comment lines.
	SSEKeepAlive time.Duration
	// RecentEvents is how many events each followed task keeps in memory,
	// and TopicLinger how long it keeps following a task nobody watches.
	RecentEvents int
	TopicLinger  time.Duration
	// MaxSubscriptions per connection. Default DefaultMaxSubscriptions (256).
	MaxSubscriptions int
	// RequestTimeout bounds the store work of one request (an HTTP JSON
	// endpoint, a WebSocket history or conversations request): past it the
	// request answers unavailable instead of holding the tab's slot for as
	// long as the database is stuck. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// UI serves everything that is not an API route (the chat UI).
	UI     http.Handler
	Logger *slog.Logger
	Now    func() time.Time
	// Uploads serves /v1/uploads (PROTOCOL.md section 10); nil: no uploads.
	Uploads Uploads
	// Ready reports whether the store is reachable (for /readyz).
	Ready func(ctx context.Context) error
	// Tracing is the process's tracer provider (internal/tracing); nil:
	// no spans.
	Tracing trace.TracerProvider
}

const minQueueBytes = 1 << 20

// Defaults of Config that are settings; internal/config declares them with
// these.
const (
	DefaultSessionTTL       = 30 * 24 * time.Hour
	DefaultMaxTabsPerUser   = 64
	DefaultMaxPending       = 64
	DefaultMaxSubscriptions = 256
	DefaultQueueBytes       = 4 << 20
	DefaultRequestTimeout   = 15 * time.Second
)

func (c Config) withDefaults() Config {
	c.QueueBytes = max(cmp.Or(c.QueueBytes, DefaultQueueBytes), minQueueBytes)
	c.PingInterval = cmp.Or(c.PingInterval, 25*time.Second)
	c.PongTimeout = cmp.Or(c.PongTimeout, 30*time.Second)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 10*time.Second)
	c.CancelWait = cmp.Or(c.CancelWait, 5*time.Second)
	c.SSEKeepAlive = cmp.Or(c.SSEKeepAlive, 15*time.Second)
	c.RecentEvents = cmp.Or(c.RecentEvents, 4096)
	c.TopicLinger = cmp.Or(c.TopicLinger, 30*time.Second)
	c.MaxSubscriptions = cmp.Or(c.MaxSubscriptions, DefaultMaxSubscriptions)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.MaxTabsPerUser = cmp.Or(c.MaxTabsPerUser, DefaultMaxTabsPerUser)
	c.MaxPending = cmp.Or(c.MaxPending, DefaultMaxPending)
	c.SessionTTL = cmp.Or(c.SessionTTL, DefaultSessionTTL)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.UI == nil {
		c.UI = http.NotFoundHandler()
	}
	return c
}

// Server is one gateway.
type Server struct {
	cfg     Config
	store   task.Store
	bus     Bus
	log     *slog.Logger
	tracer  trace.Tracer
	metrics *metrics
	hub     *hub
	users   *userHub
	auth    *authenticator
	limit   *limiter
	// conns limits new connections per client IP; tabs counts each user's
	// open tabs and SSE streams.
	conns *limiter
	tabs  *tabCounter

	// ctx ends every connection's work at shutdown.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closing  bool
	sessions map[*wsSession]struct{}
	streams  sync.WaitGroup
	// mounts are the routes of other APIs (Mount).
	mounts []mount
}

// New makes a gateway on a store and a bus.
func New(cfg Config, store task.Store, bus Bus) (*Server, error) {
	if store == nil || bus == nil {
		return nil, errors.New("gateway: a store and a bus are required")
	}
	cfg = cfg.withDefaults()
	if cfg.AuthSecret == nil && cfg.Keys == nil && len(cfg.CookieKey) < 16 {
		return nil, errors.New("gateway: anonymous mode needs a cookie key of at least 16 bytes")
	}
	if cfg.AuthSecret != nil && len(cfg.AuthSecret) < minSecretBytes {
		return nil, fmt.Errorf("gateway: the JWT secret must be at least %d bytes", minSecretBytes)
	}
	m := newMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:     cfg,
		store:   store,
		bus:     bus,
		log:     cfg.Logger,
		tracer:  tracing.Tracer(cfg.Tracing),
		metrics: m,
		hub:     newHub(bus, cfg.Logger, m, cfg.RecentEvents, cfg.TopicLinger, cfg.QueueBytes),
		auth: &authenticator{secret: cfg.AuthSecret, keys: cfg.Keys, methods: jwtMethods(cfg.AuthSecret, cfg.Keys),
			cookieKey: cfg.CookieKey, now: cfg.Now,
			audience: cfg.JWTAudience, issuer: cfg.JWTIssuer, sessionTTL: cfg.SessionTTL, trusted: cfg.TrustedProxies},
		limit:    newLimiter(cfg.Rate, cfg.Now),
		conns:    newLimiter(cfg.ConnRate, cfg.Now),
		tabs:     newTabCounter(cfg.MaxTabsPerUser),
		ctx:      ctx,
		cancel:   cancel,
		sessions: map[*wsSession]struct{}{},
	}
	s.users = newUserHub(bus, cfg.Logger)
	bus.OnReconnect(s.hub.catchUpAll)
	return s, nil
}

// requestContext is the context of one request's store work: ctx with the
// request deadline.
func (s *Server) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// Shutdown closes every tab with 1012 once its queued events are written,
// ends SSE streams, and drops upstream subscriptions. It returns when all
// connections are gone or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	sessions := make([]*wsSession, 0, len(s.sessions))
	for ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()

	var wg sync.WaitGroup
	for _, ss := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss.shutdown(ctx)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		s.cancel() // ends SSE streams and any remaining work
		s.streams.Wait()
		s.hub.work.Wait() // the followers' catch-ups, which stop with their streams
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		err = ctx.Err()
	}
	s.hub.close()
	s.users.close()
	return err
}

func (s *Server) track(ss *wsSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.sessions[ss] = struct{}{}
	s.metrics.connections.Inc()
	return true
}

func (s *Server) untrack(ss *wsSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[ss]; ok {
		delete(s.sessions, ss)
		s.metrics.connections.Dec()
	}
}
