package natsbus

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context (traceparent, tracestate) of the span that sent a
// request rides in the NATS message's headers, so a runner's spans join the
// trace of the gateway's submit. Only requests carry it (dispatches and
// cancels); task events do not: they are the hot path, and a tab's resume
// has its own span.
var traceContext propagation.TraceContext

// headerCarrier is a nats.Header as a propagation.TextMapCarrier.
type headerCarrier nats.Header

func (h headerCarrier) Get(key string) string { return nats.Header(h).Get(key) }

func (h headerCarrier) Set(key, value string) { nats.Header(h).Set(key, value) }

func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// injectTrace adds ctx's span context to h, allocating h when needed; with
// no span in ctx (tracing off) it returns h as it was.
func injectTrace(ctx context.Context, h nats.Header) nats.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	if h == nil {
		h = nats.Header{}
	}
	traceContext.Inject(ctx, headerCarrier(h))
	return h
}

// extractTrace returns ctx with the remote span context carried in h, if any.
func extractTrace(ctx context.Context, h nats.Header) context.Context {
	if h.Get("traceparent") == "" {
		return ctx
	}
	return traceContext.Extract(ctx, headerCarrier(h))
}
