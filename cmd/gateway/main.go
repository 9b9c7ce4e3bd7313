// Command gateway serves Tether's WebSocket, SSE and HTTP API and the chat
// UI. With NATS_URL unset it embeds a NATS server with JetStream. It applies
// the schema's pending migrations before it serves, unless -migrate=false;
// `gateway migrate` applies them and exits (docs/deploy.md, "Migrations").
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
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tether-dev/tether/internal/compat"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/jwks"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/profiling"
	"github.com/tether-dev/tether/internal/tracing"
	"github.com/tether-dev/tether/internal/uploads"
	"github.com/tether-dev/tether/internal/webui"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "migrate" {
		return migrate(ctx, args[1:], getenv, stdout, stderr)
	}
	c, err := config.Load(config.Gateway, args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	// OpenTelemetry tracing, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set
	// (docs/deploy.md, "Tracing").
	tp, stopTracing, err := tracing.Start(ctx, "tether-gateway", getenv, log)
	if err != nil {
		return err
	}
	defer flushTraces(stopTracing, log)
	if c.PprofAddr != "" {
		prof, err := profiling.Start(c.PprofAddr, log)
		if err != nil {
			return err
		}
		defer prof.Close()
	}

	// The keys: JWTs (an HS256 secret, identity providers' key sets, or
	// both) or anonymous cookies and, derived from the secret (or else the
	// session key) unless set on its own, the key that signs page cursors.
	var authSecret, cookieKey []byte
	if c.AuthSecret != "" {
		authSecret = []byte(c.AuthSecret)
	} else {
		if len(c.JWKSURLs) == 0 {
			log.Warn("RUNNING WITHOUT AUTH: TETHER_AUTH_SECRET and TETHER_JWT_JWKS_URL are unset, every browser gets an anonymous user. Set one (HS256 JWTs, or an identity provider's JWK Set) before exposing this gateway.")
		}
		if cookieKey, err = sessionKey(c); err != nil {
			return err
		}
	}
	cursorKey := []byte(c.CursorKey)
	if len(cursorKey) == 0 {
		from := authSecret
		if from == nil {
			from = cookieKey
		}
		cursorKey = config.DeriveKey(from, "cursor key v1")
	}
	// The key sets are fetched until run returns; one that cannot be
	// fetched now is logged and tried again, and the gateway serves.
	var keys gateway.KeySet
	if len(c.JWKSURLs) > 0 {
		keysCtx, stopKeys := context.WithCancel(context.Background())
		defer stopKeys()
		set, err := jwks.New(keysCtx, jwks.Config{URLs: c.JWKSURLs, Refresh: c.JWKSRefresh,
			UnknownKIDEvery: c.JWKSUnknownKIDEvery, Logger: log})
		if err != nil {
			return err
		}
		keys = set
	}

	natsURL := c.NATSURL
	if natsURL == "" {
		srv, err := natsbus.StartServer(natsbus.ServerConfig{Listen: c.NATSListen, StoreDir: c.DataDir})
		if err != nil {
			return fmt.Errorf("start embedded NATS on %s: %w", c.NATSListen, err)
		}
		defer func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}()
		natsURL = srv.ClientURL()
		log.Info("embedded NATS started", "url", natsURL, "store", filepath.Join(c.DataDir, "nats"))
	}

	store, err := postgres.Dial(ctx, c.DatabaseURL, postgres.Config{
		IdempotencyTTL: c.IdempotencyTTL, PendingTimeout: c.PendingTimeout,
		Lease: c.Lease, MaxAttempts: c.MaxAttempts, MaxRetries: c.MaxRetries, CursorKey: cursorKey,
		MigrateTimeout: c.MigrateTimeout, NoMigrate: !c.Migrate,
		StatementTimeout: c.StatementTimeout, LockTimeout: c.LockTimeout,
	}, c.ConnectTimeout, func(err error) { log.Warn("Postgres not reachable yet, retrying", "err", err) })
	if err != nil {
		return err
	}
	defer store.Close()

	bus, err := natsbus.Connect(ctx, natsURL, natsbus.Config{Name: "tether-gateway", MaxElapsed: c.ConnectTimeout,
		Replicas: c.NATSReplicas, TaskMaxBytes: int64(c.LogMaxBytes), Logger: log})
	if err != nil {
		// natsbus's errors name the URL without its password.
		return err
	}
	defer bus.Close()

	// Uploads keep their bytes in a directory of this gateway or an S3
	// bucket (uploads.go) and the rest in Postgres.
	blobs, err := uploadBlobs(ctx, c, log)
	if err != nil {
		return err
	}
	ups, err := uploads.New(uploads.Config{MaxSize: int64(c.MaxUpload), TTL: c.UploadTTL, Logger: log}, store, blobs)
	if err != nil {
		return err
	}

	gw, err := gateway.New(gateway.Config{
		AllowedOrigins:   c.AllowedOrigins,
		TrustedProxies:   c.TrustedProxies,
		AuthSecret:       authSecret,
		Keys:             keys,
		JWTAudience:      c.JWTAudience,
		JWTIssuer:        c.JWTIssuer,
		CookieKey:        cookieKey,
		SessionTTL:       c.SessionTTL,
		Rate:             c.Rate,
		ConnRate:         c.ConnRate,
		MaxTabsPerUser:   c.MaxTabsPerUser,
		MaxSubscriptions: c.MaxSubscriptions,
		MaxPending:       c.MaxPending,
		QueueBytes:       c.QueueBytes,
		RequestTimeout:   c.RequestTimeout,
		UI:               webui.Handler(),
		Uploads:          ups,
		Logger:           log,
		Ready:            store.Ping,
		Tracing:          tp,
	}, store, natsgateway.New(bus))
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	// The APIs apps already use (PROTOCOL.md section 11), over the same core.
	compat.Mount(gw, compat.Config{})
	hs := gw.HTTPServer(c.IdleTimeout)
	fmt.Fprintf(stdout, "Tether gateway listening on http://%s\n", displayAddr(ln.Addr()))

	loopCtx, stopLoops := context.WithCancel(context.Background())
	defer stopLoops()
	loopMetrics, err := maintenance.NewMetrics(gw.Registerer())
	if err != nil {
		return fmt.Errorf("maintenance metrics: %w", err)
	}
	loop := &maintenance.Loop{Store: store, Bus: bus, Uploads: ups, LogGrace: c.LogGrace,
		StepTimeout: c.MaintenanceTimeout, Metrics: loopMetrics, Logger: log}
	// A loop that cannot run (loop.Go logs why) is a gateway without
	// maintenance: it shuts down and says so rather than serve on.
	loopDone := loop.Go(loopCtx)

	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	var runErr error
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case err := <-loopDone:
		runErr = fmt.Errorf("maintenance loop: %w", err)
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
	for range loopDone {
	}
	return runErr
}

// migrate is `gateway migrate`: the migration step alone, for deployments
// that run it before starting gateways and runners with -migrate=false
// (docs/deploy.md). It takes the gateway's settings; DATABASE_URL,
// TETHER_CONNECT_TIMEOUT and TETHER_MIGRATE_TIMEOUT are the ones it uses.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := config.Load(config.Gateway, args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	v, err := postgres.Migrate(ctx, c.DatabaseURL, postgres.Config{MigrateTimeout: c.MigrateTimeout}, c.ConnectTimeout,
		func(err error) { log.Warn("Postgres not reachable yet, retrying", "err", err) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema migrated: version %d\n", v)
	return nil
}

// sessionKey is the anonymous-cookie key: TETHER_SESSION_KEY, or a random
// key kept in the data directory so cookies survive restarts.
func sessionKey(c *config.Config) ([]byte, error) {
	if c.SessionKey != "" {
		return []byte(c.SessionKey), nil
	}
	path := filepath.Join(c.DataDir, "session.key")
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
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

// flushTraces sends the spans still queued on the way out, for a few
// seconds at most: a collector that is down does not hold up the exit.
func flushTraces(stop func(context.Context) error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		log.Warn("tracing: spans not flushed at exit", "err", err)
	}
}
