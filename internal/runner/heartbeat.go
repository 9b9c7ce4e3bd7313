package runner

import (
	"context"
	"errors"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// heartbeat extends the attempt's lease every Lease/3 until ctx is done. A
// failed heartbeat (Postgres restarting, a network blip) is retried
// promptly, every Lease/10, so a short outage costs no lease. It is also
// how a cancel whose NATS message was lost still arrives, and how a runner
// learns that its attempt was fenced out.
func (a *attempt) heartbeat(ctx context.Context) {
	every, retry := a.r.cfg.Lease/3, max(a.r.cfg.Lease/10, time.Millisecond)
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
		switch {
		// A task that is gone (its conversation was deleted) is fenced too.
		case errors.Is(err, task.ErrFenced), task.ErrorCode(err) == task.CodeNotFound:
			a.log.Warn("attempt fenced out: stopping without further writes", "reason", err)
			a.stop(task.ErrFenced)
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("heartbeat failed, retrying", "err", err, "retry_in", retry)
			t.Reset(retry)
			continue
		}
		a.mu.Lock()
		// The lease runs from when the heartbeat was sent, which is never
		// later than when the store stamped it.
		a.setLeaseLocked(sent.Add(a.r.cfg.Lease))
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

// leaseValid reports whether the runner still holds its lease by its own clock.
func (a *attempt) leaseValid() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.r.cfg.Now().Before(a.leaseUntil)
}
