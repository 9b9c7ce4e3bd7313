// Package postgres is Tether's source of truth: conversations, messages,
// tasks and their transitions in Postgres, behind the interfaces of
// internal/task. The schema (migrations/*.sql) enforces the same rules as
// the Go code, and every write that races another (submits of one id, a
// cancel and a runner's finish, two runners claiming) is decided by a
// unique key or a row lock in Postgres, never by a read followed by a write.
//
// Migrating is a step of its own, after connecting and with its own budget
// (Config.MigrateTimeout): Open and Dial apply the pending migrations under
// an advisory lock, or, with Config.NoMigrate, only refuse a schema that is
// behind (ErrSchemaBehind), for deployments that migrate apart.
//
// Submits of new tasks without attachments made at the same time share one
// statement and one commit (group commit, batch.go): a lone submit runs at
// once, and the submits that arrive while the store's batches are in
// flight go together in the next one. The batch only inserts new ids; every
// submit it did not write (a repeat, a conflict, another user's
// conversation) is decided by the full transaction, so the answers and the
// idempotency rules are those of PROTOCOL.md section 4 whatever the
// batching. Submits with attachments and SubmitVersion's placed turns take
// the full transaction only.
package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tether-dev/tether/internal/task"
)

// connectTimeout bounds one connection attempt when the URL sets no
// connect_timeout.
const connectTimeout = 5 * time.Second

// Store implements the gateway's, the runner's and maintenance's view of
// the tasks on one Postgres pool.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	// poolCfg is what pool was made from; migrations run on a pool of
	// their own made from it.
	poolCfg *pgxpool.Config
	// batch groups concurrent submits into one statement (batch.go).
	batch batcher
}

var (
	_ task.Store       = (*Store)(nil)
	_ task.RunnerStore = (*Store)(nil)
	_ task.Maintainer  = (*Store)(nil)
)

// Open connects to databaseURL (a pgx URL; pool_max_conns and the like may be
// given there), then prepares the schema: it applies the pending migrations
// (within cfg.MigrateTimeout and ctx) or, with cfg.NoMigrate, refuses a
// schema that lacks one. Several processes may open one database at once:
// migrations run under an advisory lock.
func Open(ctx context.Context, databaseURL string, cfg Config) (*Store, error) {
	s, err := connect(ctx, databaseURL, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.prepareSchema(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return s, nil
}

// connect makes the store's pool; it neither connects yet nor looks at the
// schema.
func connect(ctx context.Context, databaseURL string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// The URL may hold a password: do not repeat it.
		return nil, fmt.Errorf("open postgres: parse database URL: %w", redactURLError(err))
	}
	// A server that accepts TCP and then hangs must fail a connection attempt
	// (and the request waiting for it, as unavailable) rather than hold it.
	if poolCfg.ConnConfig.ConnectTimeout == 0 {
		poolCfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	if cfg.ApplicationName != "" {
		poolCfg.ConnConfig.RuntimeParams["application_name"] = cfg.ApplicationName
	}
	// No statement runs, and no lock is waited for, without a limit: a row
	// held FOR UPDATE by a stuck transaction makes a request answer
	// unavailable (classify) rather than hang with its caller.
	limit := func(param string, d time.Duration) {
		if _, set := poolCfg.ConnConfig.RuntimeParams[param]; !set {
			poolCfg.ConnConfig.RuntimeParams[param] = strconv.FormatInt(max(d.Milliseconds(), 1), 10)
		}
	}
	limit("statement_timeout", cfg.StatementTimeout)
	limit("lock_timeout", cfg.LockTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return &Store{pool: pool, cfg: cfg, poolCfg: poolCfg,
		batch: batcher{slots: batchSlots(poolCfg.MaxConns)}}, nil
}

// Ping checks that the database answers (readiness probes).
func (s *Store) Ping(ctx context.Context) (err error) {
	defer classify(&err)
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// Close fails the submits still waiting for a batch, then closes the pool;
// it waits for connections in use (batches in flight) to be returned.
func (s *Store) Close() {
	s.batch.close()
	s.pool.Close()
}

// Pool exposes the pool, for tests that look at rows directly.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// now is the store's clock, truncated to what timestamptz keeps
// (microseconds) so a time the store returns equals the same time read back.
func (s *Store) now() time.Time {
	return s.cfg.Now().UTC().Truncate(time.Microsecond)
}
