package runner

import (
	"context"
	"errors"
	"time"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// engineErrorMessage is the task error for an engine that failed without a
// Failure of its own: its detail is logged, never shown.
const engineErrorMessage = "engine error"

// end writes the attempt's outcome: Postgres first (Finish, with the last
// batch), then the terminal status event and the user's task event. A
// silent stop (fenced, lease lapsed, abandoned) writes nothing at all.
func (a *attempt) end(runErr error) {
	var cause error
	if a.ctx.Err() != nil {
		cause = context.Cause(a.ctx)
	}
	ended := endStopped
	defer func() { a.r.metrics.ended.WithLabelValues(ended).Inc() }()
	if silent(cause) {
		a.r.metrics.lost(cause)
		a.log.Warn("attempt stopped without finishing", "reason", cause, "seq", a.lastSeq())
		return
	}
	f := task.Finish{Status: task.StatusDone}
	var failure *engine.Failure
	switch {
	case runErr == nil:
	case errors.As(runErr, &failure):
		f.Status, f.Error = task.StatusFailed, &failure.Message
	case errors.Is(cause, errCancel):
		f.Status = task.StatusCancelled
	default:
		msg := engineErrorMessage
		f.Status, f.Error = task.StatusFailed, &msg
		a.log.Error("engine error", "err", runErr)
	}

	// The snapshotter has stopped: the last batch is everything after the
	// stored snapshot. Its events must be in the log before the finish is
	// in Postgres; settle publishes them again if NATS lost them.
	a.mu.Lock()
	f.Snapshot = a.snapshotLocked()
	f.Snapshot.Seq = a.seq + 1 // the terminal status event's
	a.mu.Unlock()
	pos, err := a.settle()
	if err != nil {
		a.log.Error("events not in the log; stopping without finishing", "seq", f.Seq-1, "err", err)
		return
	}
	f.StreamPos = pos

	finished, ok := a.finish(f)
	if !ok {
		return
	}
	if finished.Seq != f.Seq {
		a.log.Error("store finished at an unexpected seq", "seq", f.Seq, "stored_seq", finished.Seq)
	}
	ended = string(finished.Status)
	a.publishStatus(task.StatusEvent(finished))
	a.publishUserTask(finished)
	a.log.Info("attempt finished", "status", finished.Status, "seq", finished.Seq,
		"keep", a.claimed.Keep, "snapshots", a.snapshots, "republished", a.outages)
}

// finish writes f, switching to cancelled when the store says a cancel was
// requested, and retrying store errors while the lease is held.
func (a *attempt) finish(f task.Finish) (task.Task, bool) {
	wait := 100 * time.Millisecond
	for {
		ctx, span := a.startSpan(a.io, tracing.SpanFinish, tracing.KeySeq.Int64(f.Seq))
		t, err := a.r.store.Finish(ctx, f)
		tracing.End(span, err)
		switch {
		case err == nil:
			return t, true
		case errors.Is(err, task.ErrCancelRequested) && f.Status != task.StatusCancelled:
			f.Status, f.Error = task.StatusCancelled, nil
			continue
		case errors.Is(err, task.ErrFenced), errors.Is(err, task.ErrSeqMismatch),
			task.ErrorCode(err) == task.CodeNotFound:
			a.log.Warn("finish refused: stopping without publishing", "seq", f.Seq, "err", err)
			return task.Task{}, false
		}
		// The finish is fenced by the attempt in Postgres, so it may be
		// tried until the attempt gives up (lapsed): an outage shorter than
		// that ends in a finish, not a takeover.
		if a.lapsed() || a.io.Err() != nil {
			a.log.Error("finish failed and the lease is gone: leaving the task to maintenance", "seq", f.Seq, "err", err)
			return task.Task{}, false
		}
		a.log.Warn("finish failed, retrying", "seq", f.Seq, "err", err)
		if !sleep(a.io, wait) {
			return task.Task{}, false
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (a *attempt) lastSeq() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seq
}

// sleep waits d unless ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryWait sleeps d before an attempt publishes again, or less if the NATS
// connection comes back (back, from natsBack before the try that failed, is
// closed), and returns the wait before the next try: doubled up to 2 s, or
// back to 100 ms after a reconnect. ok is false when ctx ended.
func retryWait(ctx context.Context, d time.Duration, back <-chan struct{}) (next time.Duration, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return d, false
	case <-back:
		return 100 * time.Millisecond, true
	case <-t.C:
		return min(2*d, 2*time.Second), true
	}
}
