// Command runner claims Tether tasks from the NATS work queue, runs an
// engine on them and publishes their events; it also runs a maintenance
// loop. Like the gateway it migrates the schema at start unless
// -migrate=false, and `runner migrate` migrates and exits. See the README
// for its configuration.
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/profiling"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/tracing"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "migrate" {
		return migrate(ctx, args[1:], getenv, stdout, stderr)
	}
	o, err := config.Load(config.Runner, args, getenv, stderr)
	if err != nil {
		return err
	}
	// The store needs the id before the runner exists (its sessions are
	// named after it).
	o.RunnerID = cmp.Or(o.RunnerID, runner.DefaultID())
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.LogLevel}))
	// OpenTelemetry tracing, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set
	// (docs/deploy.md, "Tracing").
	tp, stopTracing, err := tracing.Start(ctx, "tether-runner", getenv, log)
	if err != nil {
		return err
	}
	defer flushTraces(stopTracing, log)
	var prof *profiling.Server
	if o.PprofAddr != "" {
		if prof, err = profiling.Start(o.PprofAddr, log); err != nil {
			return err
		}
		defer prof.Close()
	}
	eng, err := engine.Open(o.Engine, engine.Config{Logger: log, OpenAI: engine.OpenAIConfig{
		BaseURL: o.OpenAIBaseURL, APIKey: o.OpenAIAPIKey, Model: o.OpenAIModel, SystemPrompt: o.OpenAISystemPrompt,
		Temperature: o.OpenAITemperature, MaxTokens: o.OpenAIMaxTokens, ContextBudget: o.OpenAIContextBudget,
		RequestTimeout: o.OpenAITimeout, FirstTokenTimeout: o.OpenAIFirstTokenTimeout,
		Continue: engine.ContinueMode(o.OpenAIContinue)}})
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
	bus, err := natsbus.Connect(ctx, o.NATSURL, natsbus.Config{Name: "runner " + o.RunnerID,
		MaxElapsed: o.ConnectTimeout, Replicas: o.NATSReplicas, TaskMaxBytes: int64(o.LogMaxBytes),
		Logger: log, WriteGate: func() bool {
			r := gate.Load()
			return r == nil || r.MaySend()
		}})
	if err != nil {
		return fmt.Errorf("cannot reach NATS (is it running? set NATS_URL): %w", err)
	}
	defer bus.Close()

	r, err := runner.New(runner.Config{ID: o.RunnerID, Engine: eng, Concurrency: o.Concurrency,
		Lease: o.Lease, DrainTimeout: o.DrainTimeout, ClaimTimeout: o.ClaimTimeout, Logger: log,
		PackWindow: packWindow(o.PackDeltas), Tracing: tp}, store, natsrunner.New(bus))
	if err != nil {
		return err
	}
	gate.Store(r)
	// The runner has no listener of its own: its Prometheus series are on
	// the profiler's private address (docs/deploy.md, "Dashboard and alerts").
	if prof != nil {
		prof.Handle("GET /metrics", r.MetricsHandler())
	}
	// The URL may hold a password: print it redacted.
	fmt.Fprintf(stdout, "runner %s: engine %s, %d at once, NATS %s\n", r.ID(), o.Engine, o.Concurrency, natsbus.RedactURL(o.NATSURL))

	loopMetrics, err := maintenance.NewMetrics(r.Registerer())
	if err != nil {
		return err
	}
	loop := &maintenance.Loop{Store: store, Bus: bus, Interval: o.MaintenanceInterval, LogGrace: o.LogGrace,
		StepTimeout: o.MaintenanceTimeout, Metrics: loopMetrics, Logger: log}
	// Maintenance stops with the signal, or with the runner if it stops on
	// its own; the runner drains after it. A loop that cannot run (loop.Go
	// logs why) stops the runner too: a runner without maintenance would
	// serve on with nobody's lost tasks handed over from here.
	runCtx, stopRunner := context.WithCancel(ctx)
	defer stopRunner()
	loopDone := loop.Go(runCtx)
	var loopErr error
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if err := <-loopDone; err != nil {
			loopErr = fmt.Errorf("maintenance loop: %w", err)
			stopRunner()
		}
	}()
	err = r.Run(runCtx)
	stopRunner()
	<-watched
	return errors.Join(loopErr, err)
}

// migrate is `runner migrate`: the migration step alone, as `gateway
// migrate` (docs/deploy.md), for a host that has only the runner.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := config.Load(config.Runner, args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.LogLevel}))
	v, err := postgres.Migrate(ctx, o.DatabaseURL, postgres.Config{MigrateTimeout: o.MigrateTimeout}, o.ConnectTimeout,
		func(err error) { log.Warn("Postgres not reachable yet, retrying", "err", err) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema migrated: version %d\n", v)
	return nil
}

// openStore opens Postgres, retrying until connectTimeout: a runner started
// together with its database waits for it instead of failing at once.
func openStore(ctx context.Context, o *config.Config, log *slog.Logger) (*postgres.Store, error) {
	cfg := postgres.Config{IdempotencyTTL: o.IdempotencyTTL, PendingTimeout: o.PendingTimeout,
		Lease: o.Lease, MaxAttempts: o.MaxAttempts, ResultInlineMax: o.ResultInlineMax,
		ApplicationName: postgres.RunnerApplicationName(o.RunnerID),
		MigrateTimeout:  o.MigrateTimeout, NoMigrate: !o.Migrate,
		StatementTimeout: o.StatementTimeout, LockTimeout: o.LockTimeout}
	return postgres.Dial(ctx, o.DatabaseURL, cfg, o.ConnectTimeout, func(err error) {
		log.Warn("Postgres not reachable yet, retrying", "err", err)
	})
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

// packWindow is runner.Config.PackWindow for TETHER_PACK_DELTAS: the
// default window, or none.
func packWindow(pack bool) time.Duration {
	if pack {
		return runner.DefaultPackWindow
	}
	return -1
}
