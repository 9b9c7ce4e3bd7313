package tracing

import (
	"crypto/sha256"
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/task"
)

// Span names: one per step an operator follows a request through
// (docs/deploy.md, "Tracing").
const (
	// SpanSubmit: a gateway's submit (WebSocket, POST /v1/tasks and the
	// section-11 APIs): the idempotent write and the dispatch.
	SpanSubmit = "tether.submit"
	// SpanClaim: a runner's claim of a dispatched attempt, a child of the
	// submit that dispatched it (the trace context rides on the NATS
	// dispatch message).
	SpanClaim = "tether.claim"
	// SpanEngine: the engine's run for one attempt, a child of the claim.
	SpanEngine = "tether.engine"
	// SpanSnapshot: one batched snapshot write to Postgres, a child of the
	// claim.
	SpanSnapshot = "tether.snapshot"
	// SpanFinish: the attempt's last write (its final batch and status).
	SpanFinish = "tether.finish"
	// SpanCancel: a gateway's cancel (the store's conditional update, the
	// request to the runner and the wait for its answer) and, as its
	// child over NATS, the runner's stop of the attempt.
	SpanCancel = "tether.cancel"
	// SpanResume: a tab's subscribe or SSE (re)connect: attach, snapshot
	// and the catch-up from the log.
	SpanResume = "tether.resume"
)

// Attribute keys.
const (
	KeyTaskID    = attribute.Key("tether.task_id")
	KeyAttempt   = attribute.Key("tether.attempt")
	KeyUser      = attribute.Key("tether.user")
	KeySeq       = attribute.Key("tether.seq")
	KeyErrorCode = attribute.Key("tether.error_code")
	KeyOutcome   = attribute.Key("tether.outcome")
)

// HashUser is what a span says of a user: the first 16 hex digits of the
// SHA-256 of the id, so an operator can group one user's requests without
// a trace holding the id (an email, a subject claim) itself. Empty for
// an empty id.
func HashUser(userID string) string {
	if userID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(userID))
	return hex.EncodeToString(sum[:8])
}

// User is the tether.user attribute of userID (hashed).
func User(userID string) attribute.KeyValue { return KeyUser.String(HashUser(userID)) }

// Task is the attributes of one attempt of a task.
func Task(taskID string, attempt int) []attribute.KeyValue {
	return []attribute.KeyValue{KeyTaskID.String(taskID), KeyAttempt.Int(attempt)}
}

// End ends span, first recording err, if any, with its Tether error code
// (as the API would report it).
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		code := task.ErrorCode(err)
		span.SetAttributes(KeyErrorCode.String(string(code)))
		span.RecordError(err)
		span.SetStatus(codes.Error, string(code))
	}
	span.End()
}

// Tracer is tp's tracer for Tether, or Off's when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = Off
	}
	return tp.Tracer(InstrumentationName)
}
