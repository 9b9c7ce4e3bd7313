package runner

import (
	"context"
	"errors"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// heartbeat extends the attempt's lease every Lease/3 until ctx is done. A
// failed heartbeat (Postgres restarting, a network blip) is retried
// promptly, from 100 ms backing off to Lease/10, so a short outage costs no
// lease. It is also how a cancel whose NATS message was lost still arrives,
// and how a runner learns that its attempt was fenced out.
//
// A runner whose heartbeats keep failing goes quiet at its quiet point (a
// fifth of the lease before it runs out) and pauses: its engine waits and it
// sends nothing. Nobody can take the task over while Postgres is down, so
// the first heartbeat that succeeds afterwards proves the task is still its
// own (a takeover makes the heartbeat fenced) and the attempt resumes where
// it was. Only when no heartbeat has succeeded for a lease past the lease's
// end (lapsedLocked) does it stop for good, leaving the task to maintenance,
// which hands it to a new attempt that continues the answer.
func (a *attempt) heartbeat(ctx context.Context) {
	every, maxRetry := a.r.cfg.Lease/3, max(a.r.cfg.Lease/10, time.Millisecond)
	retry := min(100*time.Millisecond, maxRetry)
	failures := 0
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := a.r.cfg.Now()
		callCtx, cancel := context.WithTimeout(ctx, every)
		cancelRequested, err := a.r.store.Heartbeat(callCtx, a.claimed.ID, a.claimed.Attempt)
		cancel()
		if err != nil {
			a.r.metrics.heartbeats.WithLabelValues(heartbeatFailed).Inc()
		} else {
			a.r.metrics.heartbeats.WithLabelValues(heartbeatOK).Inc()
		}
		switch {
		case errors.Is(err, task.ErrFenced):
			a.log.Warn("attempt fenced out: stopping without further writes")
			a.stop(task.ErrFenced)
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			a.mu.Lock()
			lapsed := a.lapsedLocked()
			a.room.Broadcast() // a paused engine looks at the lease again
			a.mu.Unlock()
			if lapsed {
				a.log.Warn("no heartbeat succeeded for a lease past the lease: stopping; maintenance hands the task on", "err", err)
				a.stop(errLeaseLapsed)
				return
			}
			if failures++; failures == 1 {
				a.log.Warn("heartbeat failed, retrying", "err", err, "retry_in", retry)
			} else {
				a.log.Debug("heartbeat failed again, retrying", "err", err, "failures", failures, "retry_in", retry)
			}
			t.Reset(retry)
			retry = min(2*retry, maxRetry)
			continue
		}
		if failures > 0 {
			a.log.Info("heartbeat succeeded after failures", "failures", failures)
		}
		retry, failures = min(100*time.Millisecond, maxRetry), 0
		a.mu.Lock()
		// The lease runs from when the heartbeat was sent, which is never
		// later than when the store stamped it.
		a.setLeaseLocked(sent.Add(a.r.cfg.Lease))
		if a.paused {
			a.paused = false
			a.log.Info("heartbeat succeeded again: resuming the attempt")
		}
		a.room.Broadcast()
		a.mu.Unlock()
		if cancelRequested {
			a.stop(errCancel)
		}
		t.Reset(every)
	}
}

// leaseMargin is how long before its lease runs out (by its own clock) a
// runner that could not renew it stops publishing: a fifth of the lease, so
// that what it already sent is in the log before maintenance folds the log
// and hands the task to another runner.
func (a *attempt) leaseMargin() time.Duration { return a.r.cfg.Lease / 5 }

// setLeaseLocked records a renewed lease. a.mu is held.
func (a *attempt) setLeaseLocked(until time.Time) {
	a.leaseUntil = until
	a.quietAt.Store(until.Add(-a.leaseMargin()).UnixNano())
}

// leaseHeldLocked reports whether the runner may still publish for this
// attempt: its lease, less the margin, has not run out. a.mu is held.
func (a *attempt) leaseHeldLocked() bool {
	return a.r.cfg.Now().Before(a.leaseUntil.Add(-a.leaseMargin()))
}

// lapsedLocked reports whether the attempt must give up: no heartbeat has
// succeeded for a whole lease past the end of its lease, by its own clock.
// Until then a paused attempt may resume. a.mu is held.
func (a *attempt) lapsedLocked() bool {
	return !a.r.cfg.Now().Before(a.leaseUntil.Add(a.r.cfg.Lease))
}

// lapsed is lapsedLocked for callers without a.mu.
func (a *attempt) lapsed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lapsedLocked()
}

// waitLeaseLocked waits, paused, while the lease is past its quiet point
// and not lapsed. It reports false when the attempt must stop (lapsed, or
// stopped meanwhile). a.mu is held; Wait lets it go meanwhile.
func (a *attempt) waitLeaseLocked() bool {
	for !a.leaseHeldLocked() {
		if a.ctx.Err() != nil {
			return false
		}
		if a.lapsedLocked() {
			return false
		}
		if !a.paused {
			a.paused = true
			a.log.Warn("no heartbeat succeeded for most of the lease: pausing, sending nothing, until one does")
		}
		a.room.Wait()
	}
	return true
}
