package gateway

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// keyVia says which path a resume took: ws (a tab's subscribe), sse (an
// EventSource (re)connect) or watch (a section-11 stream).
const keyVia = attribute.Key("tether.via")

// startResume starts the span of a resume of taskID: attach, snapshot and
// the catch-up from the log. Its caller ends it when the follower has sent
// the snapshot and caught up (or the resume failed), not when the stream
// ends.
func (s *Server) startResume(ctx context.Context, user, taskID, via string) trace.Span {
	_, span := s.tracer.Start(ctx, tracing.SpanResume, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.KeyTaskID.String(taskID), tracing.User(user), keyVia.String(via)))
	return span
}

// resumed records the snapshot a resume starts from on its span.
func resumed(span trace.Span, t task.Task) {
	if span.IsRecording() {
		span.SetAttributes(tracing.KeyAttempt.Int(t.Attempt), tracing.KeySeq.Int64(t.Seq))
	}
}
