// Command runner claims Tether tasks from the NATS work queue, runs an
// engine on them and publishes their events; it also runs a maintenance
// loop. See the README for its configuration.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

// options are the runner's settings, from flags with environment fallbacks.
type options struct {
	databaseURL      string
	natsURL          string
	engine           string
	lease            time.Duration
	pendingTimeout   time.Duration
	idempotencyTTL   time.Duration
	maxAttempts      int
	resultInlineMax  int
	concurrency      int
	id               string
	drainTimeout     time.Duration
	connectTimeout   time.Duration
	maintenanceEvery time.Duration
	logLevel         string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var err error
	fs.StringVar(&o.databaseURL, "database-url", getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL); required")
	fs.StringVar(&o.natsURL, "nats-url", env("NATS_URL", "nats://127.0.0.1:4222"), "NATS URL (env NATS_URL)")
	fs.StringVar(&o.engine, "engine", env("TETHER_ENGINE", engine.DefaultName),
		"engine: "+strings.Join(engine.Names(), ", ")+" (env TETHER_ENGINE)")
	fs.StringVar(&o.id, "id", getenv("TETHER_RUNNER_ID"), "runner id in leases and logs (env TETHER_RUNNER_ID; default hostname-pid)")
	fs.StringVar(&o.logLevel, "log-level", env("TETHER_LOG_LEVEL", "info"), "debug, info, warn or error (env TETHER_LOG_LEVEL)")
	durations := []struct {
		p         *time.Duration
		flag, env string
		def       string
		usage     string
	}{
		{&o.lease, "lease", "TETHER_LEASE", "15s", "lease of a running task; heartbeat every third of it"},
		{&o.pendingTimeout, "pending-timeout", "TETHER_PENDING_TIMEOUT", "60s", "a task nobody claims this long fails with no_runner"},
		{&o.idempotencyTTL, "idempotency-ttl", "TETHER_IDEMPOTENCY_TTL", "24h", "finished tasks are purged after this"},
		{&o.drainTimeout, "drain-timeout", "TETHER_DRAIN_TIMEOUT", "20s", "on SIGTERM, how long running tasks may finish before they are abandoned"},
		{&o.connectTimeout, "connect-timeout", "TETHER_CONNECT_TIMEOUT", "30s", "how long to keep retrying Postgres and NATS at start"},
		{&o.maintenanceEvery, "maintenance-interval", "TETHER_MAINTENANCE_INTERVAL", "1s", "how often the maintenance loop runs"},
	}
	for _, d := range durations {
		v, perr := time.ParseDuration(env(d.env, d.def))
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("%s: %w", d.env, perr))
		}
		fs.DurationVar(d.p, d.flag, v, d.usage+" (env "+d.env+")")
	}
	ints := []struct {
		p         *int
		flag, env string
		def       string
		usage     string
	}{
		{&o.maxAttempts, "max-attempts", "TETHER_MAX_ATTEMPTS", "3", "attempts before a task fails with runner_lost"},
		{&o.concurrency, "concurrency", "TETHER_RUNNER_CONCURRENCY", "8", "tasks run at once"},
		{&o.resultInlineMax, "result-inline-max", "TETHER_RESULT_INLINE_MAX", "1048576",
			"bytes of output kept in the task; a larger answer is stored as a result_ref; -1 = never"},
	}
	for _, n := range ints {
		v, perr := strconv.Atoi(env(n.env, n.def))
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("%s: %w", n.env, perr))
		}
		fs.IntVar(n.p, n.flag, v, n.usage+" (env "+n.env+")")
	}
	if err != nil {
		return options{}, fmt.Errorf("environment: %w", err)
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.id == "" {
		host, _ := os.Hostname()
		o.id = cmp.Or(host, "runner") + "-" + strconv.Itoa(os.Getpid())
	}
	if o.databaseURL == "" {
		return options{}, errors.New("DATABASE_URL is not set: set it (or -database-url) to the Postgres URL, or use `make run`, which starts a local Postgres")
	}
	if o.lease <= 0 || o.pendingTimeout <= 0 || o.idempotencyTTL <= 0 || o.maxAttempts < 1 || o.concurrency < 1 {
		return options{}, errors.New("lease, pending timeout, idempotency TTL, max attempts and concurrency must be positive")
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	eng, err := engine.FromEnv(o.engine, getenv, log)
	if err != nil {
		return err
	}

	store, err := openStore(ctx, o, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// The bus exists before the runner whose leases gate its writes.
	var gate atomic.Pointer[runner.Runner]
	bus, err := natsbus.Connect(ctx, o.natsURL, natsbus.Config{Name: "runner " + o.id,
		MaxElapsed: o.connectTimeout, Logger: log, WriteGate: func() bool {
			r := gate.Load()
			return r == nil || r.MaySend()
		}})
	if err != nil {
		return fmt.Errorf("cannot reach NATS (is it running? set NATS_URL): %w", err)
	}
	defer bus.Close()

	r, err := runner.New(runner.Config{ID: o.id, Engine: eng, Concurrency: o.concurrency,
		Lease: o.lease, DrainTimeout: o.drainTimeout, Logger: log}, store, natsrunner.New(bus))
	if err != nil {
		return err
	}
	gate.Store(r)
	fmt.Fprintf(stdout, "runner %s: engine %s, %d at once, NATS %s\n", r.ID(), o.engine, o.concurrency, o.natsURL)

	loop := &maintenance.Loop{Store: store, Bus: bus, Interval: o.maintenanceEvery, Logger: log}
	// Maintenance stops with the signal; the runner drains after it.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = loop.Run(ctx)
	}()
	err = r.Run(ctx)
	wg.Wait()
	return err
}

// openStore opens Postgres, retrying until connectTimeout: a runner started
// together with its database waits for it instead of failing at once.
func openStore(ctx context.Context, o options, log *slog.Logger) (*postgres.Store, error) {
	cfg := postgres.Config{IdempotencyTTL: o.idempotencyTTL, PendingTimeout: o.pendingTimeout,
		Lease: o.lease, MaxAttempts: o.maxAttempts, ResultInlineMax: o.resultInlineMax}
	return postgres.Dial(ctx, o.databaseURL, cfg, o.connectTimeout, func(err error) {
		log.Warn("Postgres not reachable yet, retrying", "err", err)
	})
}
