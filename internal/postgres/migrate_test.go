package postgres_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

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
