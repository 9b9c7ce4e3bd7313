package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/syncbuffer"
)

func getenvFrom(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRunRejectsBadSettings(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{},
		{"DATABASE_URL": "postgres://x", "TETHER_LEASE": "soon"},
		{"DATABASE_URL": "postgres://x", "TETHER_RATE": "fast"},
		{"DATABASE_URL": "postgres://x", "TETHER_RATE": "-1"},
		{"DATABASE_URL": "postgres://x", "TETHER_LOG_LEVEL": "loud"},
		{"DATABASE_URL": "postgres://x", "TETHER_MAX_ATTEMPTS": "3.9"},
		{"DATABASE_URL": "postgres://x", "TETHER_AUTH_SECRET": "shorter-than-32-bytes"},
		{"DATABASE_URL": "postgres://x", "TETHER_MAX_TABS_PER_USER": "many"},
	} {
		err := run(context.Background(), nil, getenvFrom(env), io.Discard, io.Discard)
		if err == nil {
			t.Errorf("env %v: no error", env)
		}
	}
	err := run(context.Background(), nil, getenvFrom(map[string]string{"DATABASE_URL": "postgres://x",
		"TETHER_MAX_ATTEMPTS": "3.9"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "TETHER_MAX_ATTEMPTS") {
		t.Errorf("the error does not name the variable: %v", err)
	}
}

// An external NATS that cannot be reached stops the gateway with an error
// that names the URL without its password.
func TestNATSPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":           pgtest.URL(t),
		"NATS_URL":               "nats://tether:hunter2-secret@127.0.0.1:1",
		"TETHER_CONNECT_TIMEOUT": "300ms",
		"TETHER_ADDR":            "127.0.0.1:0",
		"TETHER_DATA_DIR":        t.TempDir(),
	}
	var stdout, stderr syncbuffer.Buffer
	err := run(context.Background(), nil, getenvFrom(env), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err = %v", err)
	}
	if all := err.Error() + stdout.String() + stderr.String(); strings.Contains(all, "hunter2") {
		t.Fatalf("the NATS password was printed:\n%s", all)
	}
}

// TestRunServes: the gateway with its embedded NATS comes up on a free
// port, reports ready, warns that it runs without auth, and stops cleanly.
func TestRunServes(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":       pgtest.URL(t),
		"TETHER_ADDR":        "127.0.0.1:0",
		"TETHER_NATS_LISTEN": "127.0.0.1:0",
		"TETHER_DATA_DIR":    t.TempDir(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncbuffer.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, getenvFrom(env), &stdout, &stderr) }()

	addr := regexp.MustCompile(`listening on (http://\S+)`)
	var base string
	// Longer than eventually.Deadline: before it listens, the gateway
	// starts NATS and migrates an empty schema, on a busy machine.
	if err := eventually.Within(time.Minute, "the address printed", func() (bool, error) {
		if m := addr.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
		}
		select {
		case err := <-done:
			return false, fmt.Errorf("run ended early: %v", err)
		default:
		}
		return base != "", nil
	}); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", err, resp)
	}
	resp.Body.Close()
	if !strings.Contains(stderr.String(), "RUNNING WITHOUT AUTH") {
		t.Errorf("no warning about anonymous mode in the log:\n%s", stderr.String())
	}
	cancel()
	if err := eventually.Receive(t, done, "run to stop"); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestMigrateApart: `gateway migrate` is the migration step alone; a
// gateway started with -migrate=false refuses a schema that is behind,
// naming that step, and goes on past Postgres once the schema is current.
func TestMigrateApart(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":           pgtest.URL(t),
		"NATS_URL":               "nats://127.0.0.1:1",
		"TETHER_CONNECT_TIMEOUT": "300ms",
		"TETHER_ADDR":            "127.0.0.1:0",
		"TETHER_DATA_DIR":        t.TempDir(),
	}
	ctx := context.Background()
	err := run(ctx, []string{"-migrate=false"}, getenvFrom(env), io.Discard, io.Discard)
	if !errors.Is(err, postgres.ErrSchemaBehind) || !strings.Contains(err.Error(), "gateway migrate") {
		t.Fatalf("-migrate=false on an empty schema: err = %v", err)
	}

	var stdout bytes.Buffer
	if err := run(ctx, []string{"migrate"}, getenvFrom(env), &stdout, io.Discard); err != nil {
		t.Fatalf("gateway migrate: %v", err)
	}
	if !regexp.MustCompile(`^schema migrated: version [1-9][0-9]*\n$`).MatchString(stdout.String()) {
		t.Fatalf("gateway migrate printed %q", stdout.String())
	}
	// The step is idempotent: a second run finds nothing to do.
	if err := run(ctx, []string{"migrate"}, getenvFrom(env), io.Discard, io.Discard); err != nil {
		t.Fatalf("gateway migrate again: %v", err)
	}

	env["TETHER_MIGRATE"] = "false"
	err = run(ctx, nil, getenvFrom(env), io.Discard, io.Discard)
	if err == nil || errors.Is(err, postgres.ErrSchemaBehind) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("TETHER_MIGRATE=false on a current schema: err = %v, want the unreachable NATS", err)
	}
}
