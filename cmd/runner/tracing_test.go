package main

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/syncbuffer"
	"github.com/tether-dev/tether/internal/tracing"
	"github.com/tether-dev/tether/internal/tracing/tracingtest"
)

// The command with OTEL_EXPORTER_OTLP_ENDPOINT set exports its spans as
// tether-runner, and the claim of a dispatch is a child of the span the
// dispatch carried (a gateway's submit); the engine's run, a child of the
// claim. Its exit flushes what is queued.
func TestRunTracesAClaim(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.Start(t)
	dbURL := pgtest.URL(t)
	natsURL := natstest.Start(t)
	env := map[string]string{"DATABASE_URL": dbURL, "NATS_URL": natsURL, "TETHER_RUNNER_ID": "traced",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_BSP_SCHEDULE_DELAY": "20"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var stdout, stderr syncbuffer.Buffer
	go func() { done <- run(ctx, nil, getenvFrom(env), &stdout, &stderr) }()

	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x7e, 1}, SpanID: trace.SpanID{0x5b, 1},
		TraceFlags: trace.FlagsSampled})
	_, res := submitAndDispatch(t, trace.ContextWithSpanContext(cctx, parent), dbURL, natsURL)
	var claim, eng tracingtest.Span
	eventually.True(t, "the claim and engine spans exported", func() bool {
		for _, s := range rcv.Spans(t) {
			switch s.Name {
			case tracing.SpanClaim:
				claim = s
			case tracing.SpanEngine:
				eng = s
			}
		}
		return claim.Name != "" && eng.Name != ""
	})
	cancel()
	if err := eventually.Receive(t, done, "run to stop"); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if claim.Service != "tether-runner" || claim.TraceID != parent.TraceID().String() ||
		claim.ParentID != parent.SpanID().String() || claim.Attrs["tether.task_id"] != res.Task.ID {
		t.Fatalf("claim span %+v, want a child of %v", claim, parent)
	}
	if eng.ParentID != claim.SpanID || eng.TraceID != claim.TraceID {
		t.Fatalf("engine span %+v, want a child of the claim %s", eng, claim.SpanID)
	}
}
