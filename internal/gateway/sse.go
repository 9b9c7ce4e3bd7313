package gateway

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// serveSSE streams a task's events (PROTOCOL.md section 5) with the same
// follower as a WebSocket subscription. With Last-Event-ID it continues after
// that seq when the log still holds what follows, otherwise it starts with a
// fresh snapshot. It ends after a terminal status event.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request) {
	id, err := s.auth.authenticate(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	taskID, err := pathUUID(r, "id")
	if err != nil {
		writeError(w, err)
		return
	}
	if !s.limit.allow(id.user) {
		s.metrics.rateLimited.Inc()
		writeError(w, task.Errorf(task.CodeRateLimited, "too many requests; slow down"))
		return
	}
	lastID := int64(-1)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, task.Errorf(task.CodeInvalid, "Last-Event-ID must be a seq"))
			return
		}
		lastID = n
	}
	if !s.openTab(w, id.user) {
		return
	}
	defer s.tabs.release(id.user)
	rc := http.NewResponseController(w)

	s.streams.Add(1)
	defer s.streams.Done()
	s.metrics.sseStreams.Inc()
	defer s.metrics.sseStreams.Dec()

	ctx := r.Context()
	span := s.startResume(ctx, id.user, taskID, "sse")
	k := &sseSink{out: newOutbox(s.cfg.QueueBytes, s.metrics.queueDrops.Inc)}
	f := newFollower(ctx, s.hub, taskID, k, func(ctx2 context.Context) (task.Task, error) {
		return s.store.Get(ctx2, id.user, taskID)
	})
	if err := s.hub.attach(f); err != nil {
		s.log.Warn("sse: attach", "task_id", taskID, "err", err)
		err = task.Unavailable("event bus", err)
		tracing.End(span, err)
		writeError(w, err)
		return
	}
	defer f.stop()
	t, err := s.store.Get(ctx, id.user, taskID)
	if err != nil {
		s.logError("sse", err, "task_id", taskID)
		tracing.End(span, err)
		writeError(w, err)
		return
	}
	resumed(span, t)
	// A resume of a finished stream (Last-Event-ID at or past its terminal
	// event) has nothing to send: 204 tells an EventSource to stop
	// reconnecting (HTML, "server-sent events"), where an empty 200 would
	// have it come back every few seconds forever.
	if lastID >= 0 && t.Status.Terminal() && lastID >= t.Seq {
		span.End()
		w.WriteHeader(http.StatusNoContent)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if id.newCookie != nil {
		http.SetCookie(w, id.newCookie)
	}
	w.WriteHeader(http.StatusOK)
	if err := s.flushSSE(rc); err != nil {
		tracing.End(span, err)
		return
	}

	var (
		logged []task.Msg
		at     task.Position
		resume bool
	)
	if lastID >= 0 {
		logged, at, resume = s.resumeAt(ctx, t, lastID)
	}
	// The resume's span ends when the follower has caught up.
	if resume {
		f.spawn(func() { f.startAt(at, logged, task.PositionOf(t)); span.End() })
	} else {
		f.spawn(func() { f.start(t, nil, existingTask); span.End() })
	}

	keepAlive := time.NewTicker(s.cfg.SSEKeepAlive)
	defer keepAlive.Stop()
	// The stream ends at the token's expiry, as a tab does (close 1008),
	// with an error event saying why.
	var expired <-chan time.Time
	if !id.exp.IsZero() {
		t := time.NewTimer(id.exp.Sub(s.cfg.Now()))
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case <-expired:
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			_ = protocol.SSEEvent(w, "error", 0, protocol.Error("", task.CodeUnauthorized, "token expired"))
			_ = rc.Flush()
			return
		case <-keepAlive.C:
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			if err := protocol.SSEComment(w, "keep-alive"); err != nil {
				return
			}
			if err := s.flushSSE(rc); err != nil {
				return
			}
			continue
		case <-k.out.wake:
		}
		items, overflowed := k.out.take()
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		for _, b := range items {
			if _, err := w.Write(b); err != nil {
				return
			}
		}
		if err := s.flushSSE(rc); err != nil {
			return
		}
		if overflowed || (k.finished.Load() && k.out.empty()) {
			return
		}
	}
}

// flushSSE sends what is written so far; like a tab's write, it must finish
// within WriteTimeout, so a reader that stopped reading does not hold the
// stream.
func (s *Server) flushSSE(rc *http.ResponseController) error {
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	return rc.Flush()
}

// resumeAt returns the logged events after lastID, and the position the
// client stands at, when they can be sent instead of a snapshot. An SSE id is
// a seq alone, so a resume is only taken when lastID can only be an event of
// the newest attempt: a task on its first attempt, or one whose newest
// attempt began at or before lastID with no older attempt's events logged
// from there on (a fenced-out runner's). Anything else gets a fresh snapshot.
// The follower starts from what was read here, so the log is not read twice.
//
// On the first attempt (the common case) the log is not read here at all: a
// lastID up to the snapshot's seq can only name an event of it, and the
// follower fetches what follows from the gateway's recent events or the log
// (and sends the snapshot if they do not reach it); past the snapshot, only
// the log after the snapshot's position is read, to find the event.
func (s *Server) resumeAt(ctx context.Context, t task.Task, lastID int64) ([]task.Msg, task.Position, bool) {
	if t.Attempt == 1 {
		if lastID <= t.Seq {
			return nil, task.Position{Attempt: 1, Seq: lastID}, true
		}
		msgs, err := s.bus.ReadLog(ctx, t.ID, task.PositionOf(t), t.StreamPos)
		if err != nil {
			s.log.Warn("read task log for an SSE resume; sending a snapshot", "task_id", t.ID, "err", err)
			return nil, task.Position{}, false
		}
		for i, m := range msgs {
			if m.Event.Attempt == 1 && m.Event.Seq == lastID {
				return msgs[i+1:], task.Position{Attempt: 1, Seq: lastID}, true
			}
		}
		return nil, task.Position{}, false
	}
	msgs, err := s.bus.ReadLog(ctx, t.ID, task.Position{}, 0)
	if err != nil {
		s.log.Warn("read task log for an SSE resume; sending a snapshot", "task_id", t.ID, "err", err)
		return nil, task.Position{}, false
	}
	if len(msgs) == 0 {
		return nil, task.Position{}, false
	}
	// The log is in (attempt, seq) order: the newest attempt's events last.
	newest := msgs[len(msgs)-1].Event.Attempt
	if newest < t.Attempt {
		return nil, task.Position{}, false
	}
	first := slices.IndexFunc(msgs, func(m task.Msg) bool { return m.Event.Attempt == newest })
	startSeq := msgs[first].Event.Seq
	if lastID < startSeq && newest > 1 {
		return nil, task.Position{}, false
	}
	for _, m := range msgs[:first] {
		if m.Event.Seq >= startSeq {
			return nil, task.Position{}, false
		}
	}
	current := msgs[first:]
	if newest == 1 && lastID == startSeq-1 {
		return current, task.Position{Attempt: 1, Seq: lastID}, true
	}
	for i, m := range current {
		if m.Event.Seq == lastID {
			return current[i+1:], task.Position{Attempt: newest, Seq: lastID}, true
		}
	}
	if lastID == t.Seq && t.Attempt == newest {
		// The snapshot itself (a pending retry whose event is the log's last).
		return nil, task.PositionOf(t), true
	}
	return nil, task.Position{}, false
}

// sseSink formats a follower's output as Server-Sent Events.
type sseSink struct {
	out      *outbox
	finished atomic.Bool
}

func (k *sseSink) sendSnapshot(t task.Task, _ []byte) bool {
	var b bytes.Buffer
	_ = protocol.SSEEvent(&b, "snapshot", t.Seq, protocol.Snapshot("", t))
	ok := k.out.push(b.Bytes())
	if t.Status.Terminal() {
		k.finish()
		return false
	}
	return ok
}

func (k *sseSink) sendEvent(m task.Msg) bool {
	var b bytes.Buffer
	_ = protocol.SSEEvent(&b, string(m.Event.Type), m.Event.Seq, m.Data)
	ok := k.out.push(b.Bytes())
	if m.Event.Terminal() {
		k.finish()
		return false
	}
	return ok
}

func (k *sseSink) waitRoom(ctx context.Context) { k.out.waitRoom(ctx) }

func (k *sseSink) finish() {
	k.finished.Store(true)
	k.out.signal()
}
