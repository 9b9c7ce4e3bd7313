package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/jwks/jwkstest"
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
		{"DATABASE_URL": "postgres://x", "TETHER_JWT_JWKS_URL": "https://idp.example/jwks,idp.example/jwks"},
		{"DATABASE_URL": "postgres://x", "TETHER_JWT_JWKS_REFRESH": "0s"},
		{"DATABASE_URL": "postgres://x", "TETHER_UPLOAD_S3_ENDPOINT": "http://127.0.0.1:9000"},
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
	base, stderr := startRun(t, map[string]string{})
	resp, err := http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", err, resp)
	}
	resp.Body.Close()
	// The maintenance loop's counts are on the gateway's /metrics too.
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `tether_maintenance_actions_total{action="no_runner"}`) {
		t.Errorf("/metrics has no maintenance actions:\n%s", b)
	}
	if !strings.Contains(stderr.String(), "RUNNING WITHOUT AUTH") {
		t.Errorf("no warning about anonymous mode in the log:\n%s", stderr.String())
	}
}

// TestRunWithIdPDown: a gateway whose identity provider's JWK Set cannot be
// fetched at start says so in its log and serves; a token of the
// provider's is unavailable until the set is fetched, then accepted.
func TestRunWithIdPDown(t *testing.T) {
	t.Parallel()
	key := jwkstest.RSA(t, "k1")
	idp := jwkstest.NewServer(t, key)
	idp.SetDown(true)
	base, stderr := startRun(t, map[string]string{
		"TETHER_JWT_JWKS_URL":               idp.URL,
		"TETHER_JWT_JWKS_UNKNOWN_KID_EVERY": "10ms",
	})
	if log := stderr.String(); !strings.Contains(log, "JWKS fetch failed") || strings.Contains(log, "RUNNING WITHOUT AUTH") {
		t.Errorf("the log does not say the JWK Set could not be fetched, or claims no auth:\n%s", log)
	}
	status := func() int {
		req, _ := http.NewRequest("GET", base+"/v1/conversations", nil)
		req.Header.Set("Authorization", "Bearer "+key.Sign(t, jwt.MapClaims{"sub": "ana", "exp": time.Now().Add(time.Hour).Unix()}))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(); got != http.StatusServiceUnavailable {
		t.Errorf("a provider's token while its set is down: %d, want 503", got)
	}
	idp.SetDown(false)
	eventually.True(t, "the token accepted once the set is fetched", func() bool { return status() == http.StatusOK })
}

// startRun runs the gateway with env over private defaults (a schema of its
// own, free ports, a temporary data directory) until the test ends, and
// returns its base URL and its log.
func startRun(t *testing.T, env map[string]string) (string, *syncbuffer.Buffer) {
	t.Helper()
	all := map[string]string{
		"DATABASE_URL":       pgtest.URL(t),
		"TETHER_ADDR":        "127.0.0.1:0",
		"TETHER_NATS_LISTEN": "127.0.0.1:0",
		"TETHER_DATA_DIR":    t.TempDir(),
	}
	maps.Copy(all, env)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncbuffer.Buffer
	stderr := &syncbuffer.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, getenvFrom(all), &stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := eventually.Receive(t, done, "run to stop"); err != nil {
			t.Errorf("run: %v", err)
		}
	})

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
	return base, stderr
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
