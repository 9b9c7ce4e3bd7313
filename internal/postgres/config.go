package postgres

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// Defaults of Config that are the store's own (the timings of PROTOCOL.md
// section 3 are task's). internal/config declares its settings with them.
const (
	DefaultMaxRetries       = 10
	DefaultResultInlineMax  = 1 << 20
	DefaultMigrateTimeout   = 10 * time.Minute
	DefaultStatementTimeout = 30 * time.Second
	DefaultLockTimeout      = 5 * time.Second
)

// Config tunes the store. The zero value works: every field has the default of
// PROTOCOL.md section 7.
type Config struct {
	// IdempotencyTTL is how long a finished task's id is remembered (a submit
	// of it is a lookup); Purge deletes tasks finished longer ago. Default
	// task.DefaultIdempotencyTTL (24h).
	IdempotencyTTL time.Duration
	// PendingTimeout fails a task no runner claimed in this time
	// (no_runner). Default task.DefaultPendingTimeout (60s).
	PendingTimeout time.Duration
	// Lease is how long a claim or heartbeat holds a task for its runner.
	// Default task.DefaultLease (15s).
	Lease time.Duration
	// MaxAttempts bounds the attempts of one submission when runners keep
	// losing their lease; then the task fails with runner_lost. Default
	// task.DefaultMaxAttempts (3).
	MaxAttempts int
	// Now is the store's clock. Every timestamp the store writes comes from
	// it (never from the database's now()), so tests drive time with a fake
	// clock. Default time.Now.
	Now func() time.Time
	// CursorKey signs page cursors. Every process serving one database must
	// use the same key (cmd/gateway derives it from its configured secret).
	// Default: a random key of this process, so cursors are never signed
	// with a key anyone else knows; they then work on this process only.
	CursorKey []byte
	// MaxRetries bounds how often a user may retry one failed task; the
	// next retry is a conflict. Default DefaultMaxRetries (10).
	MaxRetries int
	// ResultInlineMax is the largest output kept in the task row. A finished
	// output over it is moved to a stored result (result_ref, fetched with
	// GET /v1/results/{ref}) and the task's output is emptied, so snapshots
	// stay small. Default DefaultResultInlineMax (1 MiB), above any demo
	// answer; negative = never.
	ResultInlineMax int
	// ApplicationName names this process's sessions in Postgres
	// (application_name). Runners use RunnerApplicationName, so that
	// maintenance can end the sessions of a frozen runner that still holds
	// its task's row (stuck.go). Default: none, or what the URL says.
	ApplicationName string

	// MigrateTimeout is the budget of the migration step of Open and Dial:
	// applying the pending migrations, the wait for another process that
	// is migrating the same schema included. It is a step of its own, apart
	// from connecting: a migration that backfills a big table may take
	// minutes. A migration cut off by it is rolled back (those before it
	// stay applied). Default DefaultMigrateTimeout (10m).
	MigrateTimeout time.Duration
	// NoMigrate: Open and Dial apply no migration; they check that every
	// migration of this build is applied and refuse a schema that is
	// behind (ErrSchemaBehind). For processes started with -migrate=false
	// once the migrate step ran on its own (`gateway migrate`).
	NoMigrate bool
	// StatementTimeout and LockTimeout are Postgres's statement_timeout and
	// lock_timeout on every session of the store's pool: a statement that
	// runs longer, or waits longer for a lock (a row another transaction
	// holds FOR UPDATE, a table a migration holds), is ended by the server
	// and the call answers task.CodeUnavailable instead of hanging, whatever
	// its caller's context says. A URL that sets either keeps its own;
	// migrations run with neither, bounded by MigrateTimeout. Defaults
	// DefaultStatementTimeout (30s) and DefaultLockTimeout (5s).
	StatementTimeout time.Duration
	LockTimeout      time.Duration

	// migrations are the migration files (tests add their own); default the
	// embedded migrations/*.sql.
	migrations fs.FS
}

// withDefaults fills the zero fields and validates the result, once, in Open.
func (c Config) withDefaults() (Config, error) {
	c.IdempotencyTTL = cmp.Or(c.IdempotencyTTL, task.DefaultIdempotencyTTL)
	c.PendingTimeout = cmp.Or(c.PendingTimeout, task.DefaultPendingTimeout)
	c.Lease = cmp.Or(c.Lease, task.DefaultLease)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, task.DefaultMaxAttempts)
	c.ResultInlineMax = cmp.Or(c.ResultInlineMax, DefaultResultInlineMax)
	c.MaxRetries = cmp.Or(c.MaxRetries, DefaultMaxRetries)
	c.MigrateTimeout = cmp.Or(c.MigrateTimeout, DefaultMigrateTimeout)
	c.StatementTimeout = cmp.Or(c.StatementTimeout, DefaultStatementTimeout)
	c.LockTimeout = cmp.Or(c.LockTimeout, DefaultLockTimeout)
	if c.migrations == nil {
		c.migrations = embeddedMigrations
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(c.CursorKey) == 0 {
		c.CursorKey = make([]byte, 32)
		_, _ = rand.Read(c.CursorKey) // crypto/rand.Read never fails
	}
	var errs []error
	if c.IdempotencyTTL < 0 {
		errs = append(errs, fmt.Errorf("idempotency TTL %v is negative", c.IdempotencyTTL))
	}
	if c.PendingTimeout < 0 {
		errs = append(errs, fmt.Errorf("pending timeout %v is negative", c.PendingTimeout))
	}
	if c.Lease < 0 {
		errs = append(errs, fmt.Errorf("lease %v is negative", c.Lease))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("max attempts %d is negative", c.MaxAttempts))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("max retries %d is negative", c.MaxRetries))
	}
	if c.MigrateTimeout < 0 {
		errs = append(errs, fmt.Errorf("migrate timeout %v is negative", c.MigrateTimeout))
	}
	if c.StatementTimeout < 0 || c.LockTimeout < 0 {
		errs = append(errs, errors.New("the statement and lock timeouts must not be negative"))
	}
	if len(c.CursorKey) < 16 {
		errs = append(errs, fmt.Errorf("cursor key of %d bytes is too short (16 at least)", len(c.CursorKey)))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("postgres config: %w", err)
	}
	return c, nil
}
