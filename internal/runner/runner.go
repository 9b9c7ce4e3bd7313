// Package runner claims dispatched tasks, runs an engine on them under a
// lease, and publishes what the engine writes as numbered events, with
// batched snapshots and every status change in Postgres first.
//
// Order of writes for one attempt (DESIGN.md "Dispatch and leases"):
//
//  1. Claim in Postgres (running, the next seq), then publish the running
//     status (with keep: the bytes kept from a lost attempt, which the
//     engine continues) and the user's task event;
//  2. publish each delta/progress asynchronously with the next seq and the
//     attempt; for each batch (see Config), wait for its acks, then
//     SaveSnapshot with the stream position of its last event, off the
//     engine's path. Events stay in memory until acknowledged: when NATS is
//     away they are published again, in order, once it is back (message ids
//     drop what was stored already), so an outage is a pause, not a lost
//     attempt;
//  3. flush, Finish in Postgres with the last batch, then publish the
//     terminal status and the user's task event. Nothing of the attempt is
//     published after that.
//
// A fenced attempt (its lease lost, or the task finished by someone else)
// publishes and writes nothing more, and a runner that cannot renew its
// lease stops publishing before the lease runs out.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// Runner runs dispatched tasks. Create it with New; Run it once.
type Runner struct {
	cfg     Config
	store   Store
	bus     Bus
	log     *slog.Logger
	tracer  trace.Tracer
	metrics *metrics

	mu       sync.Mutex
	inflight map[string]*attempt // by task id, for cancel routing
	// live is a copy of inflight's attempts, replaced under mu, for MaySend,
	// which must not take a lock.
	live atomic.Pointer[[]*attempt]
	// back is closed, and replaced, when the NATS connection comes back:
	// attempts waiting to publish again try at once instead of at the end
	// of a backoff that grew while NATS was away.
	back chan struct{}
}

// New returns a runner; cfg's zero fields get their defaults.
func New(cfg Config, store Store, bus Bus) (*Runner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if store == nil || bus == nil {
		return nil, errors.New("runner: a store and a bus are required")
	}
	r := &Runner{
		cfg:      cfg,
		store:    store,
		bus:      bus,
		log:      cfg.Logger.With("runner", cfg.ID),
		tracer:   tracing.Tracer(cfg.Tracing),
		metrics:  newMetrics(),
		inflight: make(map[string]*attempt),
		back:     make(chan struct{}),
	}
	bus.OnReconnect(r.reconnected)
	return r, nil
}

// reconnected wakes every attempt waiting to publish again.
func (r *Runner) reconnected() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.back)
	r.back = make(chan struct{})
}

// natsBack returns a channel closed when the NATS connection next comes
// back.
func (r *Runner) natsBack() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.back
}

// MaySend reports whether the runner may send anything on its NATS
// connection right now: false while any of its attempts is past the point
// where it must go quiet (its lease about to lapse by the runner's own clock
// without a heartbeat). cmd/runner makes it the bus's write gate
// (natsbus.Config.WriteGate), so events the NATS client buffered before a
// pause (SIGSTOP, a frozen VM) are dropped instead of sent when the process
// resumes, after another runner may have taken the task over. It takes no
// lock: the NATS client calls it with its own lock held.
func (r *Runner) MaySend() bool {
	live := r.live.Load()
	if live == nil {
		return true
	}
	now := r.cfg.Now().UnixNano()
	for _, a := range *live {
		if now >= a.quietAt.Load() {
			return false
		}
	}
	return true
}

// publishLiveLocked refreshes live from inflight. r.mu is held.
func (r *Runner) publishLiveLocked() {
	live := make([]*attempt, 0, len(r.inflight))
	for _, a := range r.inflight {
		live = append(live, a)
	}
	r.live.Store(&live)
}

// ID is the runner id written with its leases.
func (r *Runner) ID() string { return r.cfg.ID }

// errAbandoned stops attempts still running DrainTimeout after shutdown.
var errAbandoned = errors.New("abandoned at shutdown")

// Run takes work until ctx is cancelled, then drains: it pulls nothing new,
// lets in-flight attempts run for up to DrainTimeout, and abandons the rest
// without any further write or publish (their lease expires and maintenance
// hands them to another runner as a new attempt). It returns when every
// attempt has stopped.
func (r *Runner) Run(ctx context.Context) error {
	unsubscribe, err := r.bus.SubscribeCancels(r.routeCancel)
	if err != nil {
		return fmt.Errorf("runner %s: subscribe to cancels: %w", r.cfg.ID, err)
	}
	defer func() {
		if err := unsubscribe(); err != nil {
			r.log.Warn("unsubscribe from cancels", "err", err)
		}
	}()

	// work outlives ctx by up to DrainTimeout: it is what attempts run under.
	work, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abandon(nil)
	var attempts sync.WaitGroup
	drained := make(chan struct{})
	go func() {
		select {
		case <-drained:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(r.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-drained:
		case <-t.C:
			r.mu.Lock()
			running := len(r.inflight)
			r.mu.Unlock()
			if running > 0 {
				r.log.Warn("drain timeout: abandoning attempts still running", "attempts", running, "timeout", r.cfg.DrainTimeout)
			}
			abandon(errAbandoned)
		}
	}()

	r.log.Info("runner started", "concurrency", r.cfg.Concurrency, "lease", r.cfg.Lease)
	consumeErr := r.bus.Consume(ctx, r.cfg.Concurrency, func(dctx context.Context, d Dispatch) (func(), error) {
		attempts.Add(1)
		// The attempt runs under work; of the dispatch's context it takes
		// only the trace context (the submit's span), so its spans join the
		// submit's trace.
		a, err := r.claim(trace.ContextWithSpanContext(work, trace.SpanContextFromContext(dctx)), d)
		if a == nil {
			attempts.Done()
			return nil, err
		}
		return func() { defer attempts.Done(); r.runAttempt(a) }, nil
	})
	attempts.Wait()
	close(drained)
	if consumeErr != nil && ctx.Err() == nil {
		return fmt.Errorf("runner %s: consume dispatches: %w", r.cfg.ID, consumeErr)
	}
	r.log.Info("runner stopped")
	return nil
}

// routeCancel delivers a cancel request to the attempt running that task
// in this process, if any. Its span, a child of the gateway's cancel, says
// which attempt was told to stop.
func (r *Runner) routeCancel(ctx context.Context, taskID string) {
	r.mu.Lock()
	a := r.inflight[taskID]
	r.mu.Unlock()
	if a != nil {
		_, span := r.tracer.Start(ctx, tracing.SpanCancel, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(tracing.Task(taskID, a.claimed.Attempt)...))
		a.stop(errCancel)
		span.End()
	}
}

// claim claims the dispatched task. Only a pending task is claimable, and
// the store's seq is past every logged event of its attempt (maintenance
// folded the log in when it handed a lost runner's task over), so no log
// read is needed. A task that is nobody's to run any more gives (nil, nil):
// the dispatch is spent. A store failure gives an error: the dispatch comes
// back.
//
// Its span (tracing.SpanClaim) is a child of the span in ctx, the submit's
// when the dispatch carried it; the attempt's spans are its children.
func (r *Runner) claim(ctx context.Context, d Dispatch) (_ *attempt, err error) {
	log := r.log.With("task", d.TaskID)
	traced, span := r.tracer.Start(ctx, tracing.SpanClaim, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.Task(d.TaskID, d.Attempt)...))
	defer func() { tracing.End(span, err) }()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("runner %s: shutting down", r.cfg.ID)
	}
	// The claim has a deadline of its own: one stuck on a held row or a
	// hung database gives the dispatch back (another try, maybe on another
	// runner) instead of holding a slot of this runner.
	claimCtx, cancel := context.WithTimeout(ctx, r.cfg.ClaimTimeout)
	claimed, err := r.store.Claim(claimCtx, task.Claim{TaskID: d.TaskID, RunnerID: r.cfg.ID})
	cancel()
	switch {
	case errors.Is(err, task.ErrNotClaimable), task.ErrorCode(err) == task.CodeNotFound:
		span.SetAttributes(tracing.KeyOutcome.String(claimNotClaimable))
		r.metrics.claims.WithLabelValues(claimNotClaimable).Inc()
		log.Debug("dispatch dropped: task not claimable", "dispatch_attempt", d.Attempt, "err", err)
		return nil, nil
	case err != nil:
		r.metrics.claims.WithLabelValues(claimFailed).Inc()
		return nil, fmt.Errorf("runner %s: %w", r.cfg.ID, err)
	}
	span.SetAttributes(tracing.KeyOutcome.String(claimClaimed), tracing.User(claimed.UserID),
		tracing.KeyAttempt.Int(claimed.Attempt), tracing.KeySeq.Int64(claimed.Seq))
	r.metrics.claims.WithLabelValues(claimClaimed).Inc()
	r.metrics.running.Inc()
	a := newAttempt(r, ctx, claimed, log)
	a.span = trace.SpanContextFromContext(traced)
	r.mu.Lock()
	r.inflight[claimed.ID] = a
	r.publishLiveLocked()
	r.mu.Unlock()
	return a, nil
}

// runAttempt runs a claimed attempt to its end.
func (r *Runner) runAttempt(a *attempt) {
	defer func() {
		r.metrics.running.Dec()
		r.mu.Lock()
		if r.inflight[a.claimed.ID] == a {
			delete(r.inflight, a.claimed.ID)
			r.publishLiveLocked()
		}
		r.mu.Unlock()
	}()
	a.run()
}
