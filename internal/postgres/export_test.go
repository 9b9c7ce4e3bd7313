package postgres

import (
	"context"
	"io/fs"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

// Transition runs the one transition gate in its own transaction, so the
// external tests can try every pair of statuses through it.
func (s *Store) Transition(ctx context.Context, taskID string, attempt int, from, to task.Status, at time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return transition(ctx, tx, move{TaskID: taskID, Attempt: attempt, From: from, To: to,
			Reason: "test", At: at})
	})
}

// ErrForbiddenTransition is the gate's refusal.
var ErrForbiddenTransition = errForbiddenTransition

// WithExtraMigrations returns cfg with this build's migrations and extra
// ones (name -> SQL), for tests of the migration step.
func WithExtraMigrations(cfg Config, extra map[string]string) Config {
	files := fstest.MapFS{}
	names, err := fs.Glob(embeddedMigrations, "*.sql")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		b, err := fs.ReadFile(embeddedMigrations, n)
		if err != nil {
			panic(err)
		}
		files[n] = &fstest.MapFile{Data: b}
	}
	for n, sql := range extra {
		files[n] = &fstest.MapFile{Data: []byte(sql)}
	}
	cfg.migrations = files
	return cfg
}

// DialWithAttemptTimeout is Dial with each connection attempt bounded by
// attemptTimeout instead of the default.
func DialWithAttemptTimeout(ctx context.Context, databaseURL string, cfg Config, maxWait, attemptTimeout time.Duration) (*Store, error) {
	return dial(ctx, databaseURL, cfg, maxWait, attemptTimeout, nil)
}

// Classify is the store's boundary classification, for errors of queries a
// test runs on the pool itself.
func Classify(err error) error {
	classify(&err)
	return err
}

// HoldBatches takes every batch slot, so that submits queue (and go
// together in one batch) until release is called.
func (s *Store) HoldBatches() (release func()) {
	s.batch.mu.Lock()
	s.batch.inflight += s.batch.slots
	s.batch.mu.Unlock()
	return func() {
		for range s.batch.slots {
			s.batch.handOver()
		}
	}
}

// QueuedSubmits is how many submits wait for a batch.
func (s *Store) QueuedSubmits() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.queue)
}
