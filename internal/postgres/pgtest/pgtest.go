// Package pgtest gives each test its own empty Tether schema on the Postgres
// server named by TEST_DATABASE_URL, so tests run in parallel against a real
// database without seeing each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/postgres"
)

// New opens a store on a fresh schema and closes it, and drops the schema,
// when the test ends.
func New(t testing.TB, cfg postgres.Config) *postgres.Store {
	t.Helper()
	u := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, u, cfg)
	if err != nil {
		t.Fatalf("pgtest: open store: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// URL creates a fresh, empty schema and returns TEST_DATABASE_URL with its
// search_path set to it, for a test that opens its own store (or several,
// like processes sharing one database). The schema is dropped when the test
// ends, after the cleanups registered later (closing those stores) ran.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		t.Fatal("TEST_DATABASE_URL is not set; run `make test`")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal("pgtest: TEST_DATABASE_URL is not a URL")
	}
	schema := "test_" + randomHex()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to TEST_DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() { dropSchema(t, base, schema) })

	q := u.Query()
	q.Set("options", "-csearch_path="+schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func dropSchema(t testing.TB, base, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
