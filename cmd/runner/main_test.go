package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/engine/enginetest"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/syncbuffer"
	"github.com/tether-dev/tether/internal/task"
)

func getenvFrom(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRunNeedsDatabaseURL(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	err := run(context.Background(), nil, getenvFrom(nil), &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || !strings.Contains(err.Error(), "make run") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunRejectsBadSettings(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"DATABASE_URL": "postgres://x", "TETHER_LEASE": "soon"},
		{"DATABASE_URL": "postgres://x", "TETHER_RUNNER_CONCURRENCY": "0"},
		{"DATABASE_URL": "postgres://x", "TETHER_ENGINE": "gpt-9"},
		{"DATABASE_URL": "postgres://x", "TETHER_ENGINE": "openai"},
		{"DATABASE_URL": "postgres://x", "TETHER_OPENAI_TEMPERATURE": "hot"},
		{"DATABASE_URL": "postgres://x", "TETHER_MAX_ATTEMPTS": "3.9"},
	} {
		err := run(context.Background(), nil, getenvFrom(env), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil {
			t.Fatalf("env %v: no error", env)
		}
	}
}

func TestRunFailsClearlyWithoutPostgres(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":           "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1",
		"TETHER_CONNECT_TIMEOUT": "300ms",
	}
	err := run(context.Background(), nil, getenvFrom(env), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach Postgres") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunFailsClearlyWithoutNATS(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":           pgtest.URL(t),
		"NATS_URL":               "nats://127.0.0.1:1",
		"TETHER_CONNECT_TIMEOUT": "300ms",
	}
	err := run(context.Background(), nil, getenvFrom(env), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach NATS") {
		t.Fatalf("err = %v", err)
	}
	env["NATS_URL"] = "nats://tether:hunter2-secret@127.0.0.1:1"
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), nil, getenvFrom(env), &stdout, &stderr)
	if err == nil || strings.Contains(err.Error()+stdout.String()+stderr.String(), "hunter2") {
		t.Fatalf("the NATS password was printed: %v\n%s%s", err, &stdout, &stderr)
	}
}

// The command end to end: it runs a submitted task to done, serves its
// Prometheus series on the profiler's address, and a cancel of its context
// (SIGTERM) makes it return nil.
func TestRunRunsATask(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	natsURL := natstest.Start(t)
	// A NATS server without auth ignores a user and password; the banner
	// must not print them.
	withPassword := strings.Replace(natsURL, "nats://", "nats://tether:hunter2-secret@", 1)
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": withPassword, "TETHER_RUNNER_ID": "cmd-test",
		"TETHER_PPROF_ADDR": "127.0.0.1:0"}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var runErr error
	var stdout, stderr syncbuffer.Buffer
	wg.Add(1)
	go func() {
		defer wg.Done()
		runErr = run(ctx, nil, getenvFrom(env), &stdout, &stderr)
	}()

	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	own, res := submitAndDispatch(t, cctx, dbURL, natsURL)
	var got task.Task
	if err := eventually.Within(eventually.Deadline, "the task to be done", func() (bool, error) {
		var err error
		got, err = own.Load(cctx, res.Task.ID)
		return err == nil && got.Status == task.StatusDone, err
	}); err != nil {
		t.Fatalf("%v (status %s); runner log:\n%s", err, got.Status, stderr.String())
	}
	if got.Output != enginetest.StreamText(3) {
		t.Fatalf("output %q", got.Output)
	}
	metrics := scrapeRunner(t, &stderr)
	for _, want := range []string{`tether_runner_claims_total{outcome="claimed"} 1`,
		`tether_maintenance_actions_total{action="no_runner"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics on the profiler's address lacks %s:\n%s", want, metrics)
		}
	}
	cancel()
	wg.Wait()
	if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	if out := stdout.String() + stderr.String(); !strings.Contains(out, "NATS nats://redacted@") || strings.Contains(out, "hunter2") {
		t.Fatalf("banner and log:\n%s", out)
	}
}

// TestMigrateApart: `runner migrate` is the migration step alone; a runner
// started with -migrate=false refuses a schema that is behind and goes on
// past Postgres once the schema is current.
func TestMigrateApart(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":           pgtest.URL(t),
		"NATS_URL":               "nats://127.0.0.1:1",
		"TETHER_CONNECT_TIMEOUT": "300ms",
	}
	ctx := context.Background()
	err := run(ctx, []string{"-migrate=false"}, getenvFrom(env), &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, postgres.ErrSchemaBehind) {
		t.Fatalf("-migrate=false on an empty schema: err = %v", err)
	}
	var stdout bytes.Buffer
	if err := run(ctx, []string{"migrate"}, getenvFrom(env), &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("runner migrate: %v", err)
	}
	if !strings.HasPrefix(stdout.String(), "schema migrated: version ") {
		t.Fatalf("runner migrate printed %q", stdout.String())
	}
	err = run(ctx, []string{"-migrate=false"}, getenvFrom(env), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach NATS") {
		t.Fatalf("-migrate=false on a current schema: err = %v, want the unreachable NATS", err)
	}
}

// scrapeRunner reads /metrics on the address the runner's log says the
// profiler listens on.
func scrapeRunner(t *testing.T, log *syncbuffer.Buffer) string {
	t.Helper()
	var addr string
	for _, line := range strings.Split(log.String(), "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "pprof listening" {
			addr = rec.Addr
		}
	}
	if addr == "" {
		t.Fatalf("no pprof address in the runner's log:\n%s", log.String())
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	return string(b)
}

// submitAndDispatch writes a `/stream 3 0` task into the store as a gateway
// does and dispatches its first attempt with ctx (whose span, if any, the
// dispatch carries). The store stays open until the test ends.
func submitAndDispatch(t *testing.T, ctx context.Context, dbURL, natsURL string) (*postgres.Store, task.SubmitResult) {
	t.Helper()
	own, err := postgres.Open(ctx, dbURL, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	bus, err := natsbus.Connect(ctx, natsURL, natsbus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	res, err := own.Submit(ctx, task.SubmitRequest{UserID: "u", TaskID: uuid.NewString(),
		ConversationID: uuid.NewString(), Content: "/stream 3 0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Dispatch(ctx, res.Task.ID, 1); err != nil {
		t.Fatal(err)
	}
	return own, res
}
