// Command gateway serves Tether's WebSocket, SSE and HTTP API and the chat
// UI. With NATS_URL unset it embeds a NATS server with JetStream.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/webui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

type config struct {
	addr           string
	databaseURL    string
	natsURL        string
	natsListen     string
	dataDir        string
	authSecret     string
	allowedOrigins string
	sessionKey     string
	rate           float64
	idempotencyTTL time.Duration
	pendingTimeout time.Duration
	lease          time.Duration
	maxAttempts    int
	connectTimeout time.Duration
	logLevel       string
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bad []error
	env := func(key, def string) string {
		if v := getenv(key); v != "" {
			return v
		}
		return def
	}
	dur := func(key, def string) time.Duration {
		d, err := time.ParseDuration(env(key, def))
		if err != nil || d <= 0 {
			bad = append(bad, fmt.Errorf("%s=%q is not a positive duration (like 500ms, 15s, 24h)", key, getenv(key)))
			d, _ = time.ParseDuration(def)
		}
		return d
	}
	num := func(key string, def float64) float64 {
		v := getenv(key)
		if v == "" {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			bad = append(bad, fmt.Errorf("%s=%q is not a number", key, v))
			return def
		}
		return f
	}
	fs.StringVar(&c.addr, "addr", env("TETHER_ADDR", ":8080"), "HTTP and WebSocket listen address (TETHER_ADDR)")
	fs.StringVar(&c.databaseURL, "database-url", env("DATABASE_URL", ""), "Postgres URL (DATABASE_URL)")
	fs.StringVar(&c.natsURL, "nats-url", env("NATS_URL", ""), "external NATS; empty embeds one (NATS_URL)")
	fs.StringVar(&c.natsListen, "nats-listen", env("TETHER_NATS_LISTEN", "127.0.0.1:4222"), "embedded NATS client address (TETHER_NATS_LISTEN)")
	fs.StringVar(&c.dataDir, "data-dir", env("TETHER_DATA_DIR", ".data"), "embedded JetStream storage and local files (TETHER_DATA_DIR)")
	fs.StringVar(&c.authSecret, "auth-secret", env("TETHER_AUTH_SECRET", ""), "HS256 JWT secret; empty = anonymous cookie mode (TETHER_AUTH_SECRET)")
	fs.StringVar(&c.allowedOrigins, "allowed-origins", env("TETHER_ALLOWED_ORIGINS", ""), "comma-separated exact origins; empty = own host (TETHER_ALLOWED_ORIGINS)")
	fs.StringVar(&c.sessionKey, "session-key", env("TETHER_SESSION_KEY", ""), "key signing anonymous session cookies; empty = DATA_DIR/session.key (TETHER_SESSION_KEY)")
	fs.Float64Var(&c.rate, "rate", num("TETHER_RATE", 20), "client messages and requests per second per user; 0 = no limit (TETHER_RATE)")
	fs.DurationVar(&c.idempotencyTTL, "idempotency-ttl", dur("TETHER_IDEMPOTENCY_TTL", "24h"), "how long a task id stays taken (TETHER_IDEMPOTENCY_TTL)")
	fs.DurationVar(&c.pendingTimeout, "pending-timeout", dur("TETHER_PENDING_TIMEOUT", "60s"), "pending without a runner this long fails no_runner (TETHER_PENDING_TIMEOUT)")
	fs.DurationVar(&c.lease, "lease", dur("TETHER_LEASE", "15s"), "runner lease (TETHER_LEASE)")
	fs.IntVar(&c.maxAttempts, "max-attempts", int(num("TETHER_MAX_ATTEMPTS", 3)), "attempts before runner_lost (TETHER_MAX_ATTEMPTS)")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", dur("TETHER_CONNECT_TIMEOUT", "30s"), "how long to retry Postgres and NATS at start (TETHER_CONNECT_TIMEOUT)")
	fs.StringVar(&c.logLevel, "log-level", env("TETHER_LOG_LEVEL", "info"), "debug, info, warn or error (TETHER_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := errors.Join(bad...); err != nil {
		return c, err
	}
	if c.databaseURL == "" {
		return c, errors.New("DATABASE_URL is not set: point it at Postgres, or use `make run`, which starts a local one")
	}
	if c.rate < 0 || c.maxAttempts < 1 {
		return c, errors.New("TETHER_RATE must be >= 0 and TETHER_MAX_ATTEMPTS >= 1")
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("TETHER_LOG_LEVEL: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	natsURL := c.natsURL
	if natsURL == "" {
		srv, err := natsbus.StartServer(natsbus.ServerConfig{Listen: c.natsListen, StoreDir: c.dataDir})
		if err != nil {
			return fmt.Errorf("start embedded NATS on %s: %w", c.natsListen, err)
		}
		defer func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}()
		natsURL = srv.ClientURL()
		log.Info("embedded NATS started", "url", natsURL, "store", filepath.Join(c.dataDir, "nats"))
	}

	store, err := postgres.Dial(ctx, c.databaseURL, postgres.Config{
		IdempotencyTTL: c.idempotencyTTL, PendingTimeout: c.pendingTimeout,
		Lease: c.lease, MaxAttempts: c.maxAttempts,
	}, c.connectTimeout, func(err error) { log.Warn("Postgres not reachable yet, retrying", "err", err) })
	if err != nil {
		return err
	}
	defer store.Close()

	bus, err := natsbus.Connect(ctx, natsURL, natsbus.Config{Name: "tether-gateway", MaxElapsed: c.connectTimeout})
	if err != nil {
		return fmt.Errorf("connect NATS at %s: %w", natsURL, err)
	}
	defer bus.Close()

	cfg := gateway.Config{
		Rate:   c.rate,
		UI:     webui.Handler(),
		Logger: log,
		Ready:  store.Ping,
	}
	if c.authSecret != "" {
		cfg.AuthSecret = []byte(c.authSecret)
	} else {
		log.Warn("RUNNING WITHOUT AUTH: TETHER_AUTH_SECRET is unset, every browser gets an anonymous user. Set it (HS256 JWTs) before exposing this gateway.")
		key, err := sessionKey(c)
		if err != nil {
			return err
		}
		cfg.CookieKey = key
	}
	for _, o := range strings.Split(c.allowedOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	gw, err := gateway.New(cfg, store, natsgateway.New(bus))
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.addr, err)
	}
	hs := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "Tether gateway listening on http://%s\n", displayAddr(ln.Addr()))

	loopCtx, stopLoops := context.WithCancel(context.Background())
	defer stopLoops()
	loop := &maintenance.Loop{Store: store, Bus: bus, Logger: log}
	loopDone := make(chan error, 1)
	go func() { loopDone <- loop.Run(loopCtx) }()

	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: closing tabs with 1012")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gw.Shutdown(shutCtx); err != nil {
		log.Warn("gateway shutdown", "err", err)
	}
	if err := hs.Shutdown(shutCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	stopLoops()
	<-loopDone
	return nil
}

// sessionKey is the anonymous-cookie key: TETHER_SESSION_KEY, or a random
// key kept in the data directory so cookies survive restarts.
func sessionKey(c config) ([]byte, error) {
	if c.sessionKey != "" {
		return []byte(c.sessionKey), nil
	}
	path := filepath.Join(c.dataDir, "session.key")
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("write session key: %w", err)
	}
	return key, nil
}

func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if ok && tcp.IP.IsUnspecified() {
		return "localhost:" + strconv.Itoa(tcp.Port)
	}
	return a.String()
}
