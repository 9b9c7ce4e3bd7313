package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// The actions below are shared by WebSocket, SSE and HTTP, so each protocol
// has one submit, one cancel and one subscribe logic.

// submit creates the task (or finds it, or retries it), then tells the
// runners and the user's other tabs. Its span is the root of the task's
// trace: the dispatch carries it to the runner that claims the attempt.
func (s *Server) submit(ctx context.Context, user string, req task.SubmitRequest) (res task.SubmitResult, err error) {
	ctx, span := s.tracer.Start(ctx, tracing.SpanSubmit, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.KeyTaskID.String(req.TaskID), tracing.User(user)))
	defer func() {
		if err == nil {
			span.SetAttributes(tracing.KeyAttempt.Int(res.Task.Attempt), tracing.KeyOutcome.String(submitOutcome(res)))
		}
		tracing.End(span, err)
	}()
	req.UserID = user
	res, err = s.submitToStore(ctx, req)
	if err != nil {
		s.metrics.submits.WithLabelValues(outcome(err)).Inc()
		if errors.Is(err, task.ErrTooManyRetries) {
			s.metrics.limitRefusals.WithLabelValues(limitRetries).Inc()
		}
		return res, err
	}
	switch {
	case res.Created:
		s.metrics.submits.WithLabelValues("created").Inc()
		s.announceNew(ctx, res.Task)
	case res.Retried:
		s.metrics.submits.WithLabelValues("retried").Inc()
		s.announce(ctx, res.Task, true)
	default:
		s.metrics.submits.WithLabelValues("existing").Inc()
	}
	return res, nil
}

// submitOutcome names what a submit did, for its span and metrics.
func submitOutcome(res task.SubmitResult) string {
	switch {
	case res.Created:
		return "created"
	case res.Retried:
		return "retried"
	default:
		return "existing"
	}
}

// announceNew dispatches a task just created and tells the user's tabs,
// without waiting for NATS: the task is safe in Postgres, and if a publish is
// lost the maintenance loop dispatches it again, so the submit's reply does
// not wait for an acknowledgement. The caller's follower, if any, is already
// attached, so it gets every event of the task from the first on. ctx
// carries the submit's span to the runner; nothing waits on it.
func (s *Server) announceNew(ctx context.Context, t task.Task) {
	if err := s.bus.DispatchAsync(ctx, t.ID, t.Attempt); err != nil {
		s.log.Warn("dispatch", "task_id", t.ID, "attempt", t.Attempt, "err", err)
	}
	if err := s.bus.PublishUserTask(t.UserID, t); err != nil {
		s.log.Warn("publish user task", "task_id", t.ID, "err", err)
	}
}

// announceTimeout bounds the publishes and the dispatch after a commit.
const announceTimeout = 10 * time.Second

// announce dispatches a pending task and publishes what changed. A failed
// publish is logged, not returned: the task is safe in Postgres and the
// maintenance loop re-dispatches it. It runs on a context that outlives the
// request: the commit is done, and a client that hangs up right after it
// must not cancel the dispatch.
func (s *Server) announce(ctx context.Context, t task.Task, withStatus bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), announceTimeout)
	defer cancel()
	if withStatus {
		if err := s.bus.PublishEvent(ctx, task.StatusEvent(t)); err != nil {
			s.log.Warn("publish status", "task_id", t.ID, "seq", t.Seq, "err", err)
		}
	}
	if t.Status == task.StatusPending {
		if err := s.bus.Dispatch(ctx, t.ID, t.Attempt); err != nil {
			s.log.Warn("dispatch", "task_id", t.ID, "attempt", t.Attempt, "err", err)
		}
	}
	if err := s.bus.PublishUserTask(t.UserID, t); err != nil {
		s.log.Warn("publish user task", "task_id", t.ID, "err", err)
	}
}

func outcome(err error) string {
	switch c := task.ErrorCode(err); c {
	case task.CodeInvalid, task.CodeConflict, task.CodeTooLarge:
		return string(c)
	default:
		return "error"
	}
}

// cancel cancels a task. A pending task is cancelled in Postgres at once; a
// running one is cancelled by its runner, so this asks it and waits (up to
// CancelWait) for the cancelled status, then answers with the task as it
// stands.
func (s *Server) cancelTask(ctx context.Context, user, taskID string) (_ task.Task, err error) {
	ctx, span := s.tracer.Start(ctx, tracing.SpanCancel, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.KeyTaskID.String(taskID), tracing.User(user)))
	defer func() { tracing.End(span, err) }()
	res, err := s.store.Cancel(ctx, user, taskID)
	if err != nil {
		return task.Task{}, err
	}
	if res.Cancelled {
		s.announce(ctx, res.Task, true)
		return res.Task, nil
	}
	if !res.Requested {
		return res.Task, nil
	}

	w := newTerminalWatch()
	f := newFollower(ctx, s.hub, taskID, w, func(ctx context.Context) (task.Task, error) {
		return s.store.Get(ctx, user, taskID)
	})
	if err := s.hub.attach(f); err != nil {
		// The cancel is recorded: the runner still learns of it, from this
		// message or at its next heartbeat. Without the live feed there is
		// nothing to wait on, so the answer is the task as it stands.
		s.log.Warn("cancel: cannot watch the task; answering without waiting", "task_id", taskID, "err", err)
		if err := s.bus.RequestCancel(ctx, taskID); err != nil {
			s.log.Warn("request cancel", "task_id", taskID, "err", err)
		}
		return res.Task, nil
	}
	defer f.stop()
	if err := s.bus.RequestCancel(ctx, taskID); err != nil {
		s.log.Warn("request cancel", "task_id", taskID, "err", err)
	}
	t, err := s.store.Get(ctx, user, taskID)
	if err != nil {
		return task.Task{}, err
	}
	if t.Status.Terminal() {
		return t, nil
	}
	f.spawn(func() { f.start(t, nil, existingTask) })
	wait, stop := context.WithTimeout(ctx, s.cfg.CancelWait)
	defer stop()
	select {
	case <-w.done:
	case <-wait.Done():
	}
	return s.store.Get(ctx, user, taskID)
}

// terminalWatch is a sink that only notices the end of an attempt.
type terminalWatch struct{ done chan struct{} }

func newTerminalWatch() *terminalWatch { return &terminalWatch{done: make(chan struct{})} }

func (w *terminalWatch) sendSnapshot(t task.Task, _ []byte) bool {
	if t.Status.Terminal() {
		close(w.done)
		return false
	}
	return true
}

func (w *terminalWatch) waitRoom(context.Context) {}

func (w *terminalWatch) sendEvent(m task.Msg) bool {
	if m.Event.Terminal() {
		close(w.done)
		return false
	}
	return true
}

// attach makes a follower of the task for sink k and attaches it to the
// live feed: from when it returns, every event published reaches it. The
// caller then reads (or creates) the task and hands the snapshot to start.
func (s *Server) attach(ctx context.Context, user, taskID string, k sink) (*follower, error) {
	f := newFollower(ctx, s.hub, taskID, k, func(ctx context.Context) (task.Task, error) {
		return s.store.Get(ctx, user, taskID)
	})
	if err := s.hub.attach(f); err != nil {
		s.log.Warn("attach", "task_id", taskID, "err", err)
		return nil, task.Unavailable("event bus", err)
	}
	return f, nil
}

// logError logs an error that is not the user's fault: a dependency that is
// down (a warning, counted) or a bug (an error).
func (s *Server) logError(what string, err error, attrs ...any) {
	switch task.ErrorCode(err) {
	case task.CodeUnavailable:
		s.metrics.unavailable.WithLabelValues(what).Inc()
		s.log.Warn(what, append(attrs, "err", fmt.Sprint(err))...)
	case task.CodeInternal:
		if !errors.Is(err, context.Canceled) {
			s.log.Error(what, append(attrs, "err", fmt.Sprint(err))...)
		}
	}
}
