package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies the pending migrations to the pool's current schema.
//
// The advisory lock that keeps processes starting at once from migrating
// together is keyed on the schema, not on the database: two schemas of one
// database (a test each) never wait for each other, two processes on one
// schema do.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("migrate: read current schema: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte("tether migrations\x00" + schema))
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64())),
		lock.WithLockTimeout(1, 300), // poll every second, for up to 5 minutes
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
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
