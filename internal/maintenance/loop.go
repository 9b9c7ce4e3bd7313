// Package maintenance is the background upkeep of PROTOCOL.md section 3:
// pending tasks nobody claims fail with no_runner, tasks whose runner died
// are handed to a new attempt (or fail with runner_lost), finished tasks are
// purged after the idempotency TTL, and pending tasks whose dispatch was lost
// are dispatched again.
//
// A Loop runs in every gateway and every runner process. Many at once are
// safe: the store decides every change with a conditional update or a row
// lock (SKIP LOCKED), so each change is made, and its event published, by
// exactly one of them. Each step of a round has a deadline of its own
// (Loop.StepTimeout), so a database that hangs delays a round, never stops
// the loop.
package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// Bus is the part of NATS maintenance uses; *natsbus.Bus implements it.
type Bus interface {
	// PublishEventSync publishes an event the store numbered and waits for
	// its acknowledgement.
	PublishEventSync(ctx context.Context, e task.Event) (streamPos uint64, err error)
	// PublishUserTask sends the user's "task" event.
	PublishUserTask(userID string, t task.Task) error
	// ReadLog returns the logged events of a task after the position after,
	// in (attempt, seq) order, reading from the stream position fromStreamPos.
	ReadLog(ctx context.Context, taskID string, after task.Position, fromStreamPos uint64) ([]task.Msg, error)
	// Dispatch asks a runner to run the task's attempt.
	Dispatch(ctx context.Context, taskID string, attempt int) error
	// PurgeTaskLog removes a finished task's events from the log.
	PurgeTaskLog(ctx context.Context, taskID string) error
}

// Loop is one maintenance worker. Its zero-valued fields get defaults in Run.
type Loop struct {
	Store task.Maintainer
	Bus   Bus
	// Interval between rounds. Default DefaultInterval (1s).
	Interval time.Duration
	// RedispatchAge is how long a task may stay pending before its dispatch
	// is sent again (a lost publish, a runner that died before claiming).
	// JetStream de-duplication and the conditional claim make a repeat
	// harmless. Default 5s.
	RedispatchAge time.Duration
	// RedispatchEvery is how often a task that stays pending is dispatched
	// again after that, by one process of all. Default 30s: longer than
	// JetStream's window for duplicate dispatches (20s), within which a
	// repeat would only be dropped.
	RedispatchEvery time.Duration
	// LogGrace is how long a finished task's events stay in the JetStream
	// log (for a resume that comes late) before they are purged; the
	// task's snapshot in Postgres has them all. 0: never purged here (they
	// age out with the stream's retention).
	LogGrace time.Duration
	// Uploads, when set, is swept every round: uploads that expired (no
	// message took them in time, terminated, or their conversation was
	// deleted) go with their bytes. Only a process that can reach the bytes
	// sets it: the gateway (docs/deploy.md, "Uploads storage").
	Uploads UploadSweeper
	// StepTimeout is the deadline of each step of a round (expire pending
	// tasks, expire leases, purge, sweep, purge logs, dispatch again), its
	// publishes included. Default DefaultStepTimeout.
	StepTimeout time.Duration
	// Metrics, when set, counts the loop's changes by action.
	Metrics *Metrics
	Logger  *slog.Logger
}

// Defaults of Loop; internal/config declares its settings with them.
const (
	DefaultInterval    = time.Second
	DefaultStepTimeout = 30 * time.Second
)

// UploadSweeper removes expired uploads with their bytes; *uploads.Service
// implements it.
type UploadSweeper interface {
	Sweep(ctx context.Context) (int, error)
}

// Run does a round at once and then every Interval until ctx is done. A
// failing round is logged and the next one tries again; Run returns nil
// when ctx is done, and an error only for a loop it cannot run at all.
func (l *Loop) Run(ctx context.Context) error {
	if l.Store == nil || l.Bus == nil {
		return errors.New("maintenance: a store and a bus are required")
	}
	if l.Interval < 0 || l.StepTimeout < 0 {
		return fmt.Errorf("maintenance: interval %v and step timeout %v must not be negative", l.Interval, l.StepTimeout)
	}
	interval := cmp.Or(l.Interval, DefaultInterval)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		l.Tick(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Go runs the loop in a goroutine of its own until ctx is done, for the
// process that owns it. When Run fails for a reason other than the end of
// ctx (a loop that cannot run: no maintenance in this process at all), the
// error is logged and delivered on the channel; the channel is closed once
// Run has returned, so the owner waits for it there.
func (l *Loop) Go(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer close(done)
		if err := l.Run(ctx); err != nil {
			cmp.Or(l.Logger, slog.Default()).Error("maintenance loop stopped: no maintenance in this process", "err", err)
			done <- err
		}
	}()
	return done
}

// Tick does one round: expire pending tasks, expire leases, purge, sweep
// expired uploads, purge finished tasks' logs, and dispatch again what is
// still waiting. Each step has a deadline of its own (StepTimeout); its
// failure, a deadline passed included, is logged and does not stop the
// others.
func (l *Loop) Tick(round context.Context) {
	log := cmp.Or(l.Logger, slog.Default())
	// fail logs a step's failure unless the round itself ended (shutdown).
	fail := func(what string, err error) {
		if err != nil && round.Err() == nil {
			failed(log, "maintenance: "+what, err)
		}
	}

	l.step(round, func(ctx context.Context) {
		expired, err := l.Store.ExpirePending(ctx)
		fail("expire pending tasks", err)
		l.Metrics.add(actionNoRunner, len(expired))
		for _, t := range expired {
			log.Info("task failed: no runner", "task", t.ID, "attempt", t.Attempt, "seq", t.Seq)
			l.announce(ctx, log, t)
		}
	})

	l.step(round, func(ctx context.Context) {
		handed, err := l.Store.ExpireLeases(ctx, l.fold)
		fail("expire leases", err)
		for _, t := range handed {
			log.Info("lease expired", "task", t.ID, "attempt", t.Attempt, "seq", t.Seq, "status", t.Status)
			l.announce(ctx, log, t)
			if t.Status == task.StatusPending {
				l.Metrics.add(actionHandedOn, 1)
				l.dispatch(ctx, log, t)
			} else {
				l.Metrics.add(actionRunnerLost, 1)
			}
		}
	})

	l.step(round, func(ctx context.Context) {
		purged, err := l.Store.Purge(ctx)
		fail("purge finished tasks", err)
		l.Metrics.add(actionPurged, int(purged))
		if purged > 0 {
			log.Info("purged finished tasks", "count", purged)
		}
	})

	if l.Uploads != nil {
		l.step(round, func(ctx context.Context) {
			swept, err := l.Uploads.Sweep(ctx)
			fail("sweep expired uploads", err)
			l.Metrics.add(actionUploadsSwept, swept)
			if swept > 0 {
				log.Info("swept expired uploads", "count", swept)
			}
		})
	}

	if l.LogGrace > 0 {
		l.step(round, func(ctx context.Context) {
			n, err := l.Store.PurgeLogs(ctx, l.LogGrace, l.Bus.PurgeTaskLog)
			fail("purge logs of finished tasks", err)
			l.Metrics.add(actionLogsPurged, n)
			if n > 0 {
				log.Debug("purged finished tasks' events from the log", "count", n)
			}
		})
	}

	l.step(round, func(ctx context.Context) {
		waiting, err := l.Store.Undispatched(ctx, cmp.Or(l.RedispatchAge, 5*time.Second),
			cmp.Or(l.RedispatchEvery, 30*time.Second))
		fail("find undispatched tasks", err)
		l.Metrics.add(actionRedispatched, len(waiting))
		for _, t := range waiting {
			log.Debug("dispatching again", "task", t.ID, "attempt", t.Attempt)
			l.dispatch(ctx, log, t)
		}
	})
}

// step runs one step of a round with its own deadline, as each of river's
// maintenance services carries a Timeout: a database or NATS that hangs
// costs the step its deadline, and the round goes on to the next.
func (l *Loop) step(round context.Context, f func(ctx context.Context)) {
	ctx, cancel := context.WithTimeout(round, cmp.Or(l.StepTimeout, DefaultStepTimeout))
	defer cancel()
	f(ctx)
}

// announce publishes the status event the store wrote for t (it is in
// Postgres already) and the user's task event. The status event is retried
// a few times: its message id makes a repeat harmless, and without it a
// subscriber would wait for an end that is only in Postgres.
func (l *Loop) announce(ctx context.Context, log *slog.Logger, t task.Task) {
	e := task.StatusEvent(t)
	var err error
	for i := range 3 {
		if _, err = l.Bus.PublishEventSync(ctx, e); err == nil || ctx.Err() != nil {
			break
		}
		if !sleep(ctx, time.Duration(i+1)*100*time.Millisecond) {
			break
		}
	}
	if err != nil {
		log.Error("publish status event", "task", t.ID, "seq", t.Seq, "status", t.Status, "err", err)
	}
	if err := l.Bus.PublishUserTask(t.UserID, t); err != nil {
		log.Warn("publish user task event", "task", t.ID, "err", err)
	}
}

func (l *Loop) dispatch(ctx context.Context, log *slog.Logger, t task.Task) {
	if err := l.Bus.Dispatch(ctx, t.ID, t.Attempt); err != nil && ctx.Err() == nil {
		log.Error("dispatch task", "task", t.ID, "attempt", t.Attempt, "err", err)
	}
}

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

// failed logs a failed step: a dependency that is down (task.CodeUnavailable,
// a Postgres or NATS outage) as a warning, since the next round retries it
// and nothing is wrong with Tether; anything else as an error.
func failed(log *slog.Logger, what string, err error) {
	if task.ErrorCode(err) == task.CodeUnavailable {
		log.Warn(what+" (retried next round)", "err", err)
		return
	}
	log.Error(what, "err", err)
}
