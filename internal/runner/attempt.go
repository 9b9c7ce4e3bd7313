package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// Why an attempt's engine was stopped (the cause of its context).
var (
	// errCancel: the user cancelled; the attempt ends as cancelled.
	errCancel = errors.New("cancel requested")
	// errLeaseLapsed: no heartbeat succeeded for a lease past the end of the
	// lease, so another runner may own the task; behave as fenced.
	errLeaseLapsed = errors.New("lease lapsed without a heartbeat")
	// errClosed: the engine wrote after the attempt ended.
	errClosed = errors.New("attempt already ended")
	// errRestart: the engine could not continue the kept prefix; the attempt
	// hands the task on as a new attempt that starts over.
	errRestart = errors.New("engine cannot continue: starting over")
)

// silent reports whether an attempt stopped for cause must write and
// publish nothing more.
func silent(cause error) bool {
	return errors.Is(cause, task.ErrFenced) || errors.Is(cause, errLeaseLapsed) ||
		errors.Is(cause, errAbandoned)
}

// historyLimit is how many earlier messages of the conversation an engine
// is given; an engine keeps what fits its own budget.
const historyLimit = 200

// attachmentTextBudget bounds the bytes of attachment text an attempt loads,
// newest first (4 MiB: about a million tokens, beyond any model's context,
// and at most 16 whole text files of 256 KiB).
const attachmentTextBudget = 4 << 20

// errAttachments is the task error when the attachments could not be read:
// an answer without the files the user sent would be wrong, and a retry may
// work.
const errAttachments = "attachments unavailable"

// attempt is one run of the engine on a claimed task. It is the engine's
// engine.Output: it numbers and publishes what the engine writes, and its
// snapshotter goroutine writes the batches to Postgres off the engine's path
// (publish.go).
type attempt struct {
	r    *Runner
	io   context.Context // store and bus calls; cancelled only on abandon
	ctx  context.Context // the engine's; cancelled with a cause by stop
	stop context.CancelCauseFunc
	log  *slog.Logger
	// full wakes the snapshotter when a batch reached its size limits or a
	// publish failed.
	full chan struct{}

	claimed task.Task
	// span is the claim's span context, the parent of the attempt's spans
	// (engine, snapshots, finish); invalid when tracing is off.
	span trace.SpanContext

	// pubMu serialises handing events to the publisher with cutting the
	// batch: events are published in seq order, and a cut's publisher holds
	// exactly the events up to its last seq. It is taken before mu. It is
	// held across Publisher.Publish, which returns at once unless the
	// connection has its limit of acknowledgements outstanding, and then
	// waits at most the publisher's stall wait; it is never held while
	// waiting for room in the outbox or for a flush. So a publish that
	// stalls (NATS slow or away) holds up the engine's next event and the
	// next cut, which must come after it in the log, but neither the
	// heartbeat nor anything else that takes only mu.
	pubMu sync.Mutex

	mu sync.Mutex
	// room is signalled (with mu) when unacknowledged events were
	// acknowledged or the attempt stopped: an engine waiting for room in
	// the outbox goes on.
	room *sync.Cond
	// pub publishes the events since the last cut; each cut gets a new one,
	// so flushing the old one yields exactly the stream position of the
	// cut's last event while the engine goes on publishing.
	pub Publisher
	// broken: a publish or an acknowledgement failed (NATS is away). New
	// events only queue in unacked; the snapshotter publishes them all
	// again, in order, until NATS acknowledges them.
	broken     bool
	closed     bool       // no more engine writes
	seq        int64      // last seq assigned
	storedSeq  int64      // seq of the snapshot in Postgres
	progress   int        // current progress (of the attempt)
	unsaved    []byte     // delta text after storedSeq
	unacked    []outEvent // events not yet acknowledged by the log, in seq order
	unackedLen int        // their approximate size in bytes
	// open is how many events at the end of unacked are in no log message
	// yet: a pack being gathered, or events queued while broken; openBytes
	// is their delta text's size (pack.go).
	open, openBytes int
	wrote           bool      // the engine wrote at least one delta
	cutN            int       // events since the last cut
	cutBytes        int       // delta bytes since the last cut
	cutPos          uint64    // stream position of the last acknowledged event
	leaseUntil      time.Time // by the runner's clock
	paused          bool      // past the quiet point without a heartbeat: sending nothing
	snapshots       int       // SaveSnapshot calls, for the log
	outages         int       // times the events were published again

	// snapshotFailures counts SaveSnapshot failures in a row; only the
	// snapshotter goroutine uses it.
	snapshotFailures int

	// lastSend is when a log message last went to the publisher, and
	// packTimer sends a gathered pack that nothing else sends; both are
	// guarded by pubMu.
	lastSend  time.Time
	packTimer *time.Timer

	// quietAt is leaseUntil less the lease margin, in Unix nanoseconds:
	// from then on the runner sends nothing (Runner.MaySend).
	quietAt atomic.Int64
}

func newAttempt(r *Runner, work context.Context, claimed task.Task, log *slog.Logger) *attempt {
	ctx, stop := context.WithCancelCause(work)
	a := &attempt{
		r:          r,
		io:         work,
		ctx:        ctx,
		stop:       stop,
		log:        log.With("attempt", claimed.Attempt),
		full:       make(chan struct{}, 1),
		pub:        r.bus.NewPublisher(),
		claimed:    claimed,
		seq:        claimed.Seq,
		storedSeq:  claimed.Seq,
		progress:   claimed.Progress,
		cutPos:     claimed.StreamPos,
		leaseUntil: r.cfg.Now().Add(r.cfg.Lease),
	}
	a.room = sync.NewCond(&a.mu)
	a.setLeaseLocked(a.leaseUntil)
	// An engine waiting for room must see the attempt stop.
	context.AfterFunc(ctx, func() {
		a.mu.Lock()
		a.room.Broadcast()
		a.mu.Unlock()
	})
	return a
}

// run publishes the running status, runs the engine with the heartbeat and
// the snapshotter alongside, and ends the attempt.
func (a *attempt) run() {
	defer a.stop(nil)
	a.log.Info("attempt started", "seq", a.claimed.Seq, "keep", a.claimed.Keep)
	// Claim wrote running to Postgres; now the log and the user's tabs. The
	// running event carries keep: a tab truncates to it and appends.
	defer a.stopPackTimer()
	a.pubMu.Lock()
	a.mu.Lock()
	a.queueLocked(task.StatusEvent(a.claimed))
	pub, msgs := a.takeLocked(task.StatusEvent(a.claimed))
	a.mu.Unlock()
	a.send(pub, msgs)
	a.pubMu.Unlock()
	a.publishUserTask(a.claimed)

	hbCtx, stopHeartbeat := context.WithCancel(a.io)
	heartbeatDone := make(chan struct{})
	go func() { defer close(heartbeatDone); a.heartbeat(hbCtx) }()
	snapCtx, stopSnapshots := context.WithCancel(a.io)
	snapshotterDone := make(chan struct{})
	go func() { defer close(snapshotterDone); a.snapshotter(snapCtx) }()

	var err error
	if a.ctx.Err() == nil {
		in := engine.Input{TaskID: a.claimed.ID, Content: a.claimed.Input, Prefix: a.claimed.Output}
		in.History, err = a.r.store.Context(a.ctx, a.claimed.ID, historyLimit)
		if err != nil {
			// The engine can still answer the message itself; say so and go on.
			a.log.Warn("conversation context unavailable", "err", err)
		}
		withPreamble(&in, a.claimed)
		if in.Prefix != "" {
			a.log.Info("continuing a lost attempt's answer", "keep", len(in.Prefix))
		}
		in.Attachments, err = a.r.store.Attachments(a.ctx, a.claimed.ID, historyLimit, attachmentTextBudget)
		switch {
		case err != nil && a.ctx.Err() == nil:
			a.log.Error("attachments unavailable: the attempt fails", "err", err)
			err = &engine.Failure{Message: errAttachments}
		case err == nil:
			err = a.runEngine(in)
		}
		if errors.Is(err, engine.ErrCannotContinue) && a.claimed.Keep > 0 && !a.engineWrote() {
			a.log.Warn("engine cannot continue the kept answer: starting it over as a new attempt",
				"keep", a.claimed.Keep, "reason", err)
			a.stop(errRestart)
		}
	}
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	// The snapshotter finishes the batch it is writing, if any; the
	// heartbeat keeps the lease while the attempt ends.
	stopSnapshots()
	<-snapshotterDone
	if errors.Is(context.Cause(a.ctx), errRestart) {
		a.restart()
	} else {
		a.end(err)
	}
	stopHeartbeat()
	<-heartbeatDone
}

// runEngine runs the engine on in, in a span of its own.
func (a *attempt) runEngine(in engine.Input) error {
	ctx, span := a.startSpan(a.ctx, tracing.SpanEngine)
	err := a.r.cfg.Engine.Run(ctx, in, a)
	if err != nil && errors.Is(err, context.Cause(a.ctx)) {
		// Stopped (cancel, fencing, shutdown): not the engine's failure.
		span.SetAttributes(tracing.KeyOutcome.String("stopped: " + err.Error()))
		span.End()
		return err
	}
	tracing.End(span, err)
	return err
}

// startSpan starts a span of the attempt, a child of its claim's.
func (a *attempt) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return a.r.tracer.Start(trace.ContextWithSpanContext(ctx, a.span), name,
		trace.WithAttributes(tracing.Task(a.claimed.ID, a.claimed.Attempt)...), trace.WithAttributes(attrs...))
}

// Delta implements engine.Output. Text is made valid UTF-8 without NUL
// (what Postgres text and JSON clients take); an empty delta is dropped.
func (a *attempt) Delta(text string) error {
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "")
	if text == "" {
		return nil
	}
	return a.emit(task.Event{Type: task.EventDelta, Text: text})
}

// Progress implements engine.Output; a value equal to the current one is
// dropped (PROTOCOL.md: progress is sent when it changes), and so is a
// lower one (progress never decreases within an attempt).
func (a *attempt) Progress(percent int, stage string) error {
	percent = min(max(percent, 0), 100)
	return a.emit(task.Event{Type: task.EventProgress, Progress: percent, Stage: stage})
}

// Usage records the model's token counts (engine.UsageRecorder) in the log,
// per attempt, so an operator can see what a lost runner cost.
func (a *attempt) Usage(promptTokens, completionTokens int) {
	a.log.Info("token usage", "task", a.claimed.ID, "prompt_tokens", promptTokens,
		"completion_tokens", completionTokens, "keep", a.claimed.Keep)
}

var _ engine.UsageRecorder = (*attempt)(nil)

// Limits of the outbox: the events published but not yet acknowledged. While
// NATS is away they pile up here (and are published again when it is back);
// at either limit the engine waits, so a long outage slows the engine down
// instead of growing memory without bound.
const (
	maxUnacked      = 1 << 16
	maxUnackedBytes = 16 << 20
	// eventOverhead approximates an event's size beyond its text.
	eventOverhead = 96
)

// emit numbers e and queues it for publishing, waiting while the outbox is
// full or the lease is past its quiet point. It is published after mu is let
// go (under pubMu, which keeps the order), alone or in a pack (pack.go).
func (a *attempt) emit(e task.Event) error {
	for {
		if err := a.waitToEmit(); err != nil {
			return err
		}
		a.pubMu.Lock()
		a.mu.Lock()
		// The lease may have reached its quiet point meanwhile: wait again.
		// (The outbox's limits are soft: one event past them is fine.)
		if a.closed || a.ctx.Err() != nil || !a.leaseHeldLocked() {
			a.mu.Unlock()
			a.pubMu.Unlock()
			continue
		}
		if e.Type == task.EventProgress && e.Progress <= a.progress {
			a.mu.Unlock()
			a.pubMu.Unlock()
			return nil
		}
		e.TaskID, e.Seq, e.Attempt = a.claimed.ID, a.seq+1, a.claimed.Attempt
		a.queueLocked(e)
		a.seq = e.Seq
		a.cutN++
		switch e.Type {
		case task.EventDelta:
			a.unsaved = append(a.unsaved, e.Text...)
			a.cutBytes += len(e.Text)
			a.wrote = true
		case task.EventProgress:
			a.progress = e.Progress
		}
		if a.fullLocked() {
			a.wake()
		}
		pub, msgs := a.takeLocked(e)
		a.mu.Unlock()
		a.send(pub, msgs)
		a.pubMu.Unlock()
		return nil
	}
}

// waitToEmit waits until the engine may emit: the outbox has room and the
// lease is held. It returns why the engine must stop instead.
func (a *attempt) waitToEmit() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if a.closed {
			return errClosed
		}
		if a.ctx.Err() != nil {
			return context.Cause(a.ctx)
		}
		if !a.waitLeaseLocked() {
			if a.ctx.Err() != nil {
				continue // reported above
			}
			a.log.Warn("no heartbeat succeeded for a lease past the lease: stopping")
			a.stop(errLeaseLapsed)
			return errLeaseLapsed
		}
		if len(a.unacked) < maxUnacked && a.unackedLen < maxUnackedBytes {
			return nil
		}
		a.room.Wait()
	}
}

// engineWrote reports whether the engine wrote any text in this attempt.
func (a *attempt) engineWrote() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.wrote
}

// wake asks the snapshotter to run now.
func (a *attempt) wake() {
	select {
	case a.full <- struct{}{}:
	default:
	}
}

// restart hands the task on as a new attempt with nothing kept: the store
// makes it pending (its status event is the new attempt's first, keep 0, so
// every tab clears the kept text), and the dispatch goes through the queue
// like any other. The running event of this attempt is flushed first, so
// the log keeps the order.
func (a *attempt) restart() {
	ended := endStopped
	defer func() { a.r.metrics.ended.WithLabelValues(ended).Inc() }()
	if _, err := a.settle(); err != nil {
		a.log.Warn("restart: events not acknowledged; leaving the task to lease expiry", "err", err)
		return
	}
	t, err := a.r.store.Restart(a.io, a.claimed.ID, a.claimed.Attempt)
	if err != nil {
		a.log.Warn("restart refused: leaving the task as it is", "err", err)
		return
	}
	ended = endRestarted
	a.publishStatus(task.StatusEvent(t))
	a.publishUserTask(t)
	if err := a.r.bus.Dispatch(a.io, t.ID, t.Attempt); err != nil {
		// Maintenance dispatches pending tasks again.
		a.log.Warn("dispatch the restarted attempt", "err", err)
	}
	a.log.Info("answer starts over", "new_attempt", t.Attempt, "seq", t.Seq)
}

// publishUserTask sends the user's task event; a failure only delays other
// tabs' lists, so it is logged, not fatal.
func (a *attempt) publishUserTask(t task.Task) {
	if err := a.r.bus.PublishUserTask(t.UserID, t); err != nil {
		a.log.Warn("publish user task event", "seq", t.Seq, "status", t.Status, "err", err)
	}
}

// errNotSettled wraps why the attempt's events could not all be acknowledged.
var errNotSettled = errors.New("events not acknowledged")

func notSettled(err error) error { return fmt.Errorf("%w: %v", errNotSettled, err) }
