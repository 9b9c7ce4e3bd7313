package runner

import (
	"context"
	"errors"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// heartbeat extends the attempt's lease every Lease/3 until ctx is done. It
// is also how a cancel whose NATS message was lost still arrives, and how a
// runner learns that its attempt was fenced out.
func (a *attempt) heartbeat(ctx context.Context) {
	every := a.r.cfg.Lease / 3
	t := time.NewTicker(every)
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
		case errors.Is(err, task.ErrFenced):
			a.log.Warn("attempt fenced out: stopping without further writes")
			a.stop(task.ErrFenced)
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("heartbeat failed", "err", err)
			continue
		}
		a.mu.Lock()
		// The lease runs from when the heartbeat was sent, which is never
		// later than when the store stamped it.
		a.leaseUntil = sent.Add(a.r.cfg.Lease)
		a.mu.Unlock()
		if cancelRequested {
			a.stop(errCancel)
		}
	}
}

// leaseValid reports whether the runner still holds its lease by its own clock.
func (a *attempt) leaseValid() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.r.cfg.Now().Before(a.leaseUntil)
}
