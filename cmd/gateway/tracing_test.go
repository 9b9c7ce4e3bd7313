package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/tracing"
	"github.com/tether-dev/tether/internal/tracing/tracingtest"
)

const traceSecret = "a-test-secret-of-at-least-32-bytes!!"

// tracedStack runs the gateway's run with env (and a JWT secret) and, on
// its embedded NATS and the same schema, a runner wired as cmd/runner wires
// it (its own tracer provider, service tether-runner, from the same
// variables). It returns the gateway's base URL and a submit function.
func tracedStack(t *testing.T, env map[string]string) (do func(user, method, path, body string, h http.Header) *http.Response, submit func(user, content string) (string, int)) {
	t.Helper()
	env["DATABASE_URL"] = pgtest.URL(t)
	env["TETHER_AUTH_SECRET"] = traceSecret
	base, stderr := startRun(t, env)
	m := regexp.MustCompile(`"msg":"embedded NATS started","url":"([^"]+)"`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no NATS URL in the gateway's log:\n%s", stderr)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	tp, stopTracing, err := tracing.Start(ctx, "tether-runner", getenvFrom(env), log)
	if err != nil {
		t.Fatal(err)
	}
	store, err := postgres.Open(ctx, env["DATABASE_URL"], postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	bus, err := natsbus.Connect(ctx, m[1], natsbus.Config{Name: "runner", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{ID: "traced", Logger: log, Tracing: tp}, store, natsrunner.New(bus))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := eventually.Receive(t, done, "the runner to stop"); err != nil {
			t.Errorf("runner: %v", err)
		}
		bus.Close()
		store.Close()
		_ = stopTracing(context.Background())
	})

	do = func(user, method, path, body string, h http.Header) *http.Response {
		t.Helper()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user,
			"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(traceSecret))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		maps.Copy(req.Header, h)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	submit = func(user, content string) (string, int) {
		t.Helper()
		id := uuid.NewString()
		resp := do(user, http.MethodPost, "/v1/tasks",
			`{"task_id":"`+id+`","conversation_id":"`+uuid.NewString()+`","content":"`+content+`"}`, nil)
		return id, resp.StatusCode
	}
	return do, submit
}

// waitDone waits for the task to be done, as its user reads it.
func waitDone(t *testing.T, do func(user, method, path, body string, h http.Header) *http.Response, user, taskID string) {
	t.Helper()
	eventually.True(t, "the task done", func() bool {
		resp := do(user, http.MethodGet, "/v1/tasks/"+taskID, "", nil)
		var got struct{ Status string }
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&got) == nil && got.Status == "done"
	})
}

// One submit is one connected trace across the gateway and the runner,
// exported over OTLP/HTTP: the runner's claim is a child of the gateway's
// submit (the trace context rode the NATS dispatch), the engine's run and
// the attempt's writes children of the claim, every span names the task
// and attempt, and the user appears only hashed.
func TestOneSubmitOneTrace(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.Start(t)
	do, submit := tracedStack(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "20",
	})
	const user = "ana-7f3e@example.com"
	taskID, status := submit(user, "/stream 3 0")
	if status != http.StatusCreated {
		t.Fatalf("submit: %d", status)
	}
	waitDone(t, do, user, taskID)
	// A tab's resume of the finished stream (an SSE reconnect past its
	// end): a trace of its own.
	if resp := do(user, http.MethodGet, "/v1/tasks/"+taskID+"/events", "", http.Header{"Last-Event-ID": {"1000"}}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("SSE resume: %d", resp.StatusCode)
	}

	byName := map[string]tracingtest.Span{}
	var ours []tracingtest.Span
	eventually.True(t, "submit, claim, engine and finish spans exported", func() bool {
		ours = ours[:0]
		for _, s := range rcv.Spans(t) {
			if s.Attrs["tether.task_id"] == taskID {
				ours = append(ours, s)
				byName[s.Name] = s
			}
		}
		for _, n := range []string{tracing.SpanSubmit, tracing.SpanClaim, tracing.SpanEngine, tracing.SpanFinish, tracing.SpanResume} {
			if _, ok := byName[n]; !ok {
				return false
			}
		}
		return true
	})
	submitSpan, claim := byName[tracing.SpanSubmit], byName[tracing.SpanClaim]
	if submitSpan.Service != "tether-gateway" || claim.Service != "tether-runner" {
		t.Fatalf("services: submit %q, claim %q", submitSpan.Service, claim.Service)
	}
	if submitSpan.ParentID != "" {
		t.Errorf("the submit has a parent %s", submitSpan.ParentID)
	}
	resume := byName[tracing.SpanResume]
	if resume.Service != "tether-gateway" || resume.Attrs["tether.via"] != "sse" || resume.ParentID != "" {
		t.Errorf("resume span %+v", resume)
	}
	for _, s := range ours {
		if s.Name == tracing.SpanResume {
			continue
		}
		if s.TraceID != submitSpan.TraceID {
			t.Errorf("%s (%s) is in trace %s, the submit in %s", s.Name, s.Service, s.TraceID, submitSpan.TraceID)
		}
	}
	if claim.ParentID != submitSpan.SpanID {
		t.Errorf("the claim's parent is %s, want the submit %s", claim.ParentID, submitSpan.SpanID)
	}
	for _, n := range []string{tracing.SpanEngine, tracing.SpanFinish} {
		if byName[n].ParentID != claim.SpanID {
			t.Errorf("%s's parent is %s, want the claim %s", n, byName[n].ParentID, claim.SpanID)
		}
	}
	for _, s := range ours {
		if s.Attrs["tether.attempt"] != "1" {
			t.Errorf("%s: tether.attempt = %q", s.Name, s.Attrs["tether.attempt"])
		}
		for k, v := range s.Attrs {
			if strings.Contains(v, "ana-7f3e") {
				t.Errorf("%s: attribute %s holds the raw user id: %q", s.Name, k, v)
			}
		}
	}
	for _, n := range []string{tracing.SpanSubmit, tracing.SpanClaim, tracing.SpanResume} {
		if got := byName[n].Attrs["tether.user"]; got != tracing.HashUser(user) {
			t.Errorf("%s: tether.user = %q, want %q", n, got, tracing.HashUser(user))
		}
	}
}

// A collector that is down neither fails nor holds up a submit: the task
// is created and runs to its end.
func TestSubmitWithCollectorDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	do, submit := tracedStack(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": down,
		"OTEL_BSP_SCHEDULE_DELAY":     "1",
	})
	for range 3 {
		id, status := submit("ben", "/stream 2 0")
		if status != http.StatusCreated {
			t.Fatalf("submit: %d", status)
		}
		waitDone(t, do, "ben", id)
	}
}

// A cancel of a running task is one trace too: the runner's stop of the
// attempt is a child of the gateway's cancel, over the NATS cancel message.
func TestCancelTrace(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.Start(t)
	do, submit := tracedStack(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL,
		"OTEL_BSP_SCHEDULE_DELAY":     "20",
	})
	taskID, status := submit("cy", "/stream 100000 5")
	if status != http.StatusCreated {
		t.Fatalf("submit: %d", status)
	}
	eventually.True(t, "the task running", func() bool {
		resp := do("cy", http.MethodGet, "/v1/tasks/"+taskID, "", nil)
		var got struct{ Status string }
		return json.NewDecoder(resp.Body).Decode(&got) == nil && got.Status == "running"
	})
	if resp := do("cy", http.MethodPost, "/v1/tasks/"+taskID+"/cancel", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	var gw, rn tracingtest.Span
	eventually.True(t, "both cancel spans exported", func() bool {
		for _, s := range rcv.Spans(t) {
			if s.Name == tracing.SpanCancel && s.Attrs["tether.task_id"] == taskID {
				if s.Service == "tether-gateway" {
					gw = s
				} else {
					rn = s
				}
			}
		}
		return gw.Name != "" && rn.Name != ""
	})
	if rn.Service != "tether-runner" || rn.TraceID != gw.TraceID || rn.ParentID != gw.SpanID {
		t.Fatalf("runner's cancel %+v, want a child of the gateway's %+v", rn, gw)
	}
}
