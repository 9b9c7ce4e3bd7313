package postgres_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
)

// TestOpenConcurrentlyMigratesOnce: processes starting at once on one
// database take turns migrating; each ends with the full schema.
func TestOpenConcurrentlyMigratesOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(context.Background(), url, postgres.Config{}) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer s.Close()
	}
	s := stores[0]
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`); n != len(files) {
		t.Fatalf("%d migrations recorded, want each of the %d once", n, len(files))
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	newTask(t, stores[3], "alice")
	if n := count(t, stores[1], `SELECT count(*) FROM tasks`); n != 1 {
		t.Fatalf("stores do not share the schema")
	}
}

// slowMigration takes a second, longer than the connection attempts of
// the tests below, and leaves a table behind when it completes.
var slowMigration = map[string]string{"99001_slow.sql": `-- +goose Up
SELECT pg_sleep(1);
CREATE TABLE slow_marker (x int);
-- +goose Down
DROP TABLE slow_marker;
`}

// TestMigrationOutlivesConnectAttempt: the migration step is not part of a
// connection attempt. A migration that takes longer than an attempt may
// completes within the migrate budget; cut off by that budget instead, it
// is rolled back and the error says which setting cut it.
func TestMigrationOutlivesConnectAttempt(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const attempt = 100 * time.Millisecond

	short := postgres.WithExtraMigrations(postgres.Config{MigrateTimeout: attempt}, slowMigration)
	if s, err := postgres.DialWithAttemptTimeout(ctx, url, short, time.Minute, attempt); err == nil {
		s.Close()
		t.Fatal("a migration of a second completed within a budget of 100ms")
	} else if !strings.Contains(err.Error(), "TETHER_MIGRATE_TIMEOUT") {
		t.Fatalf("the error does not name the budget: %v", err)
	}

	cfg := postgres.WithExtraMigrations(postgres.Config{}, slowMigration)
	s, err := postgres.DialWithAttemptTimeout(ctx, url, cfg, time.Minute, attempt)
	if err != nil {
		t.Fatalf("dial with a slow migration: %v", err)
	}
	defer s.Close()
	if n := count(t, s, `SELECT count(*) FROM pg_tables WHERE tablename = 'slow_marker' AND schemaname = current_schema()`); n != 1 {
		t.Fatal("the slow migration's table is missing")
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != 99001 {
		t.Fatalf("schema version %d, %v; want 99001", v, err)
	}
}

// TestNoMigrateRefusesSchemaBehind: told not to migrate, the store refuses
// a schema that lacks one of its migrations, naming them, and writes
// nothing; once the schema is current it opens.
func TestNoMigrateRefusesSchemaBehind(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := postgres.Open(ctx, url, postgres.Config{NoMigrate: true})
	if !errors.Is(err, postgres.ErrSchemaBehind) || !strings.Contains(err.Error(), "00001") ||
		!strings.Contains(err.Error(), "migrate") {
		t.Fatalf("empty schema: err = %v, want ErrSchemaBehind naming 00001 and the migrate step", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the check wrote to the schema: %d tables, %v", tables, err)
	}

	migrated, err := postgres.Open(ctx, url, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	migrated.Close()
	s, err := postgres.Open(ctx, url, postgres.Config{NoMigrate: true})
	if err != nil {
		t.Fatalf("current schema refused: %v", err)
	}
	s.Close()

	// A newer build (one more migration) started without migrating refuses
	// the schema the older build left.
	newer := postgres.WithExtraMigrations(postgres.Config{NoMigrate: true}, slowMigration)
	if _, err := postgres.Open(ctx, url, newer); !errors.Is(err, postgres.ErrSchemaBehind) || !strings.Contains(err.Error(), "99001") {
		t.Fatalf("newer build: err = %v, want ErrSchemaBehind naming 99001", err)
	}
}
