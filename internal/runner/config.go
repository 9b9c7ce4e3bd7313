package runner

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/task"
)

// Config tunes a runner. The zero value works apart from Engine, which
// defaults to the demo engine.
type Config struct {
	// ID names this runner in leases and logs. Default hostname-pid.
	ID string
	// Engine answers the tasks. Default engine.New("demo").
	Engine engine.Engine
	// Concurrency is how many attempts run at once; the runner pulls a
	// dispatch only when it has room. Default DefaultConcurrency (8).
	Concurrency int
	// Lease must equal the store's lease (TETHER_LEASE). The runner
	// heart-beats every Lease/3 and stops publishing on its own when a
	// whole Lease passes without a successful heartbeat, because by then
	// maintenance may have handed the task to another runner. Default
	// task.DefaultLease (15s), the store's.
	Lease time.Duration
	// DrainTimeout is how long in-flight attempts may keep running after
	// Run's context is cancelled (SIGTERM) before they are abandoned.
	// Default DefaultDrainTimeout (20s).
	DrainTimeout time.Duration
	// ClaimTimeout bounds the claim of a dispatched task in the store; past
	// it the dispatch comes back for another try. Default
	// DefaultClaimTimeout.
	ClaimTimeout time.Duration

	// Snapshot batching: the events published since the last snapshot are
	// written to Postgres in one SaveSnapshot when SnapshotInterval has
	// passed or SnapshotEvents events or SnapshotBytes bytes of delta text
	// have accumulated, whichever comes first. Defaults 100ms, 256, 64 KiB:
	// a subscriber's snapshot lags the live stream by about 100 ms, and a
	// fast stream costs one Postgres write per batch instead of one per
	// token. Writes run in a goroutine of their own, one at a time, while
	// the engine goes on publishing: when Postgres is slower than the
	// stream the batches grow instead of the stream slowing down.
	SnapshotInterval time.Duration
	SnapshotEvents   int
	SnapshotBytes    int

	// PackWindow: deltas that come within it of the last log message
	// sent are packed into one log message (pack.go), so a fast stream
	// costs the log a message per pack rather than per token, and a slow
	// one sends each delta at once. Default DefaultPackWindow; negative:
	// one message per event, for a log that readers from before packs
	// still read (docs/deploy.md: upgrade every reader first).
	PackWindow time.Duration

	// Now is the runner's clock for its own lease bookkeeping. Default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Tracing is the process's tracer provider (internal/tracing); nil:
	// no spans.
	Tracing trace.TracerProvider
}

// Defaults of Config; internal/config declares its settings with them.
const (
	DefaultConcurrency  = 8
	DefaultDrainTimeout = 20 * time.Second
	DefaultClaimTimeout = 10 * time.Second
	DefaultPackWindow   = 2 * time.Millisecond
)

// DefaultID is Config.ID's default: hostname-pid.
func DefaultID() string {
	host, _ := os.Hostname()
	return cmp.Or(host, "runner") + "-" + strconv.Itoa(os.Getpid())
}

// withDefaults fills the zero fields and validates, once, in New.
func (c Config) withDefaults() (Config, error) {
	c.ID = cmp.Or(c.ID, DefaultID())
	if c.Engine == nil {
		e, err := engine.New(engine.DefaultName)
		if err != nil {
			return Config{}, fmt.Errorf("runner config: %w", err)
		}
		c.Engine = e
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Lease = cmp.Or(c.Lease, task.DefaultLease)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.ClaimTimeout = cmp.Or(c.ClaimTimeout, DefaultClaimTimeout)
	c.SnapshotInterval = cmp.Or(c.SnapshotInterval, 100*time.Millisecond)
	c.SnapshotEvents = cmp.Or(c.SnapshotEvents, 256)
	c.SnapshotBytes = cmp.Or(c.SnapshotBytes, 64<<10)
	c.PackWindow = cmp.Or(c.PackWindow, DefaultPackWindow)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs []error
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency %d is negative", c.Concurrency))
	}
	if c.Lease < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease %v is too short", c.Lease))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("drain timeout %v is negative", c.DrainTimeout))
	}
	if c.ClaimTimeout < 0 {
		errs = append(errs, fmt.Errorf("claim timeout %v is negative", c.ClaimTimeout))
	}
	if c.SnapshotInterval < 0 || c.SnapshotEvents < 0 || c.SnapshotBytes < 0 {
		errs = append(errs, errors.New("snapshot batch limits must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("runner config: %w", err)
	}
	return c, nil
}
