package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// embeddedMigrations are this build's migrations, at the root of the FS.
var embeddedMigrations = func() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}()

// ErrSchemaBehind: the database lacks migrations of this build, and the
// store was told not to apply them (Config.NoMigrate).
var ErrSchemaBehind = errors.New("the database schema is behind this build")

// Migrate is the migration step alone (`gateway migrate`, `runner
// migrate`): it waits for the database like Dial, applies the pending
// migrations within cfg.MigrateTimeout (cfg.NoMigrate is ignored) and
// returns the schema's version.
func Migrate(ctx context.Context, databaseURL string, cfg Config, maxWait time.Duration, onRetry func(error)) (int64, error) {
	cfg.NoMigrate = false
	s, err := Dial(ctx, databaseURL, cfg, maxWait, onRetry)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return s.SchemaVersion(ctx)
}

// prepareSchema is the migration step of Open and Dial: it applies the
// pending migrations within Config.MigrateTimeout, or with NoMigrate only
// checks that there are none.
func (s *Store) prepareSchema(ctx context.Context) error {
	if s.cfg.NoMigrate {
		return s.checkSchema(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MigrateTimeout)
	defer cancel()
	err := migrate(ctx, s.poolCfg, s.cfg.migrations)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("migrate: not done within %v (TETHER_MIGRATE_TIMEOUT; the migration that was running is rolled back): %w",
			s.cfg.MigrateTimeout, err)
	}
	return err
}

// migrate applies the pending migrations to the current schema of the
// database poolCfg names, on a pool of its own: the store's sessions carry
// statement and lock timeouts meant for requests, and a migration
// (a backfill, a foreign key validated on a big table) may rightly take
// longer. ctx is the whole budget, the wait for the lock included.
//
// The advisory lock that keeps processes starting at once from migrating
// together is keyed on the schema, not on the database: two schemas of one
// database (a test each) never wait for each other, two processes on one
// schema do.
func migrate(ctx context.Context, poolCfg *pgxpool.Config, migrations fs.FS) error {
	cfg := poolCfg.Copy()
	// One session holds the advisory lock, another runs the migrations.
	cfg.MaxConns, cfg.MinConns, cfg.MinIdleConns = 2, 0, 0
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "0"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer pool.Close()

	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("migrate: read current schema: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("tether migrations\x00" + schema))
	// The lock is polled every second for as long as ctx allows: the budget
	// is ctx's, not a count of polls.
	polls := uint64(DefaultMigrateTimeout / time.Second)
	if deadline, ok := ctx.Deadline(); ok {
		polls = uint64(max(time.Until(deadline)/time.Second, 0)) + 1
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64())),
		lock.WithLockTimeout(1, polls),
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations,
		goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// checkSchema reports ErrSchemaBehind when a migration of this build is not
// applied to the store's schema. It writes nothing: with -migrate=false a
// process must not create even goose's version table.
func (s *Store) checkSchema(ctx context.Context) error {
	want, err := migrationVersions(s.cfg.migrations)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	applied, err := s.appliedVersions(ctx)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	var missing []string
	for _, v := range want {
		if !slices.Contains(applied, v) {
			missing = append(missing, fmt.Sprintf("%05d", v))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: migrations %s are not applied; run the migrate step first (`gateway migrate` or `runner migrate`), or start with -migrate=true, the default",
			ErrSchemaBehind, strings.Join(missing, ", "))
	}
	return nil
}

// SchemaVersion is the highest migration applied to the store's schema (0
// for none).
func (s *Store) SchemaVersion(ctx context.Context) (_ int64, err error) {
	defer classify(&err)
	applied, err := s.appliedVersions(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if len(applied) == 0 {
		return 0, nil
	}
	return slices.Max(applied), nil
}

// appliedVersions lists the migrations goose recorded as applied (the last
// row of each version says whether it is), none when it never ran here.
func (s *Store) appliedVersions(ctx context.Context) ([]int64, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT version_id FROM (
			SELECT DISTINCT ON (version_id) version_id, is_applied
			FROM goose_db_version ORDER BY version_id, id DESC) v
		WHERE is_applied AND version_id > 0`)
	if err != nil {
		return nil, err
	}
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// migrationVersions lists the versions of the migration files in fsys.
func migrationVersions(fsys fs.FS) ([]int64, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(names))
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", n, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// redactURLError keeps a connection-string parse error from echoing the
// string (and a password in it).
func redactURLError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid database URL")
	}
	return err
}
