package natsbus_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
)

// A dispatch carries the W3C trace context of the span that sent it, by
// Dispatch or DispatchAsync, and the consumer's handler gets it as the
// remote parent; a dispatch sent without a span carries none.
func TestDispatchCarriesTraceContext(t *testing.T) {
	t.Parallel()
	gw, url := setup(t)
	runner := connect(t, url)
	sent := map[string]trace.SpanContext{}
	for i, id := range []string{taskID(31), taskID(32)} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{0xaa, byte(i + 1)}, SpanID: trace.SpanID{0xbb, byte(i + 1)},
			TraceFlags: trace.FlagsSampled,
		})
		sent[id] = sc
		ctx := trace.ContextWithSpanContext(ctxT(t), sc)
		var err error
		if i == 0 {
			err = gw.Dispatch(ctx, id, 1)
		} else {
			err = gw.DispatchAsync(ctx, id, 1)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := gw.Dispatch(ctxT(t), taskID(33), 1); err != nil {
		t.Fatal(err)
	}

	got := make(chan [2]any, 3)
	consume(t, runner, 3, func(ctx context.Context, d natsbus.Dispatch) (func(), error) {
		got <- [2]any{d.TaskID, trace.SpanContextFromContext(ctx)}
		return nil, nil
	})
	for range 3 {
		g := eventually.Receive(t, got, "a dispatch")
		id, sc := g[0].(string), g[1].(trace.SpanContext)
		want, traced := sent[id]
		switch {
		case !traced && sc.IsValid():
			t.Errorf("%s: dispatched without a span, got trace context %v", id, sc)
		case traced && (sc.TraceID() != want.TraceID() || sc.SpanID() != want.SpanID() || !sc.IsRemote() || !sc.IsSampled()):
			t.Errorf("%s: trace context %v, want %v as a remote parent", id, sc, want)
		}
	}
}

// A cancel request carries the trace context of the span that sent it.
func TestCancelCarriesTraceContext(t *testing.T) {
	t.Parallel()
	gw, url := setup(t)
	runner := connect(t, url)
	got := make(chan trace.SpanContext, 2)
	unsub, err := runner.SubscribeCancels(func(ctx context.Context, _ string) { got <- trace.SpanContextFromContext(ctx) })
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xcc, 1}, SpanID: trace.SpanID{0xdd, 1},
		TraceFlags: trace.FlagsSampled})
	if err := gw.RequestCancel(trace.ContextWithSpanContext(ctxT(t), sc), taskID(41)); err != nil {
		t.Fatal(err)
	}
	if err := gw.RequestCancel(ctxT(t), taskID(42)); err != nil {
		t.Fatal(err)
	}
	if first := eventually.Receive(t, got, "the traced cancel"); first.TraceID() != sc.TraceID() || first.SpanID() != sc.SpanID() || !first.IsRemote() {
		t.Errorf("cancel's trace context %v, want %v", first, sc)
	}
	if second := eventually.Receive(t, got, "the untraced cancel"); second.IsValid() {
		t.Errorf("a cancel sent without a span carries %v", second)
	}
}
