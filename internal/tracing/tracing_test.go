package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/tracing"
	"github.com/tether-dev/tether/internal/tracing/tracingtest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Without an endpoint, or with the SDK disabled, Start installs nothing: the
// no-op provider, whose spans record nothing, and a shutdown that does
// nothing.
func TestOffByDefault(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.Start(t)
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SDK_DISABLED": "true"},
	} {
		tp, shutdown, err := tracing.Start(context.Background(), "svc", envOf(env), quiet)
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		if tp != tracing.Off {
			t.Fatalf("%v: provider %T, want the no-op one", env, tp)
		}
		_, span := tracing.Tracer(tp).Start(context.Background(), "x")
		if span.IsRecording() || span.SpanContext().IsValid() {
			t.Fatalf("%v: a span that records", env)
		}
		span.End()
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := rcv.Spans(t); len(got) != 0 {
		t.Fatalf("exported %v", got)
	}
}

func TestBadSettingsNamed(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "::"},
		"OTEL_EXPORTER_OTLP_PROTOCOL":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"OTEL_BSP_SCHEDULE_DELAY":            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_BSP_SCHEDULE_DELAY": "1s"},
	} {
		_, _, err := tracing.Start(context.Background(), "svc", envOf(want), quiet)
		if err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%v: err %v, want one naming %s", want, err, env)
		}
	}
}

// With an endpoint, spans go over OTLP/HTTP to it, named after the service
// (OTEL_SERVICE_NAME wins over the process's own name), flushed by the
// shutdown.
func TestExportsOverOTLPHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     map[string]string
		service string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "{url}"}, "tether-test"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "{url}/v1/traces", "OTEL_SERVICE_NAME": "edge-7"}, "edge-7"},
	} {
		rcv := tracingtest.Start(t)
		for k, v := range tc.env {
			tc.env[k] = strings.ReplaceAll(v, "{url}", rcv.URL)
		}
		tp, shutdown, err := tracing.Start(context.Background(), "tether-test", envOf(tc.env), quiet)
		if err != nil {
			t.Fatal(err)
		}
		_, span := tracing.Tracer(tp).Start(context.Background(), tracing.SpanSubmit)
		span.SetAttributes(tracing.User("alice@example.com"))
		span.End()
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := rcv.Spans(t)
		if len(got) != 1 || got[0].Name != tracing.SpanSubmit || got[0].Service != tc.service {
			t.Fatalf("%v: received %+v", tc.env, got)
		}
		if u := got[0].Attrs["tether.user"]; u != tracing.HashUser("alice@example.com") || strings.Contains(u, "alice") {
			t.Fatalf("tether.user = %q", u)
		}
	}
}

// OTEL_TRACES_SAMPLER is the SDK's to read, from the process environment;
// Start must not override it with a sampler of its own.
func TestSamplerFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	rcv := tracingtest.Start(t)
	tp, shutdown, err := tracing.Start(context.Background(), "svc",
		envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}), quiet)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer(tp).Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("always_off sampler ignored: the span records")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rcv.Spans(t); len(got) != 0 {
		t.Fatalf("exported %v", got)
	}
}

// A collector that is down costs the caller nothing: spans start and end
// as usual, and the exit's flush is bounded by its context.
func TestCollectorDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	tp, shutdown, err := tracing.Start(context.Background(), "svc",
		envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": down}), quiet)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		_, span := tracing.Tracer(tp).Start(context.Background(), "x")
		span.End()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // an exit that cannot wait at all
	_ = shutdown(ctx)
}

func TestHashUser(t *testing.T) {
	t.Parallel()
	h := tracing.HashUser("user-42")
	if len(h) != 16 || h == tracing.HashUser("user-43") {
		t.Fatalf("HashUser = %q", h)
	}
	if h != tracing.HashUser("user-42") {
		t.Fatal("not stable")
	}
	if tracing.HashUser("") != "" {
		t.Fatal("an empty id hashes to something")
	}
}
