package compat

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/task"
)

// answer folds a watch's updates into the task as a client of these APIs
// sees it: the snapshot first, then each event in the order of
// task.StepOn, the rule every reader follows. The answer's text is kept in
// a buffer that grows (a string appended to at every delta would copy the
// whole answer each time); t.Output is filled from it only by task().
type answer struct {
	t    task.Task
	text []byte
	has  bool
}

// unbounded is the kept length of an answer that can still grow: nothing a
// client was sent is known to be lost.
const unbounded = math.MaxInt

// apply folds u and returns how many bytes of the answer are known to be
// unchanged by it: unbounded within an attempt (the answer only grows,
// though a snapshot may lag what a resuming client already has), the kept
// prefix when a newer attempt begins (0 when it starts over), the whole
// answer for a first snapshot of a finished task, and -1 for an event that
// does not follow (a gap the follower should have closed).
func (a *answer) apply(u gateway.Update) int {
	if s := u.Snapshot; s != nil {
		kept := unbounded
		switch {
		case !a.has && s.Status.Terminal():
			kept = len(s.Output)
		case a.has && s.Attempt != a.t.Attempt:
			kept = s.Keep
		}
		a.t, a.has = *s, true
		a.text = append(a.text[:0], s.Output...)
		a.t.Output = ""
		return kept
	}
	e := u.Event
	kept := unbounded
	switch task.StepOn(task.PositionOf(a.t), a.text, e) {
	case task.StepStart:
		a.text, a.t.Keep, kept = a.text[:e.Keep], e.Keep, e.Keep
	case task.StepNext:
	case task.StepGap:
		return -1
	default:
		return unbounded
	}
	a.t.Seq = e.Seq
	switch e.Type {
	case task.EventDelta:
		a.text = append(a.text, e.Text...)
	case task.EventStatus:
		a.t.Status, a.t.Attempt, a.t.Error, a.t.ResultRef = e.Status, e.Attempt, e.Error, e.ResultRef
	}
	return kept
}

// task is the folded task with its whole output.
func (a *answer) task() task.Task {
	t := a.t
	t.Output = string(a.text)
	return t
}

// encoder turns the answer into one API's stream. update is called after
// each update with the folded answer and how much of the answer before it
// is still its start (answer.apply); it writes what that adds and reports
// whether the stream is over.
type encoder interface {
	update(out *sseWriter, a *answer, kept int) (done bool, err error)
}

// sseWriter writes an SSE answer: every write and flush within the write
// timeout, so a client that stopped reading does not hold the stream.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *sseWriter) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	_, err := s.w.Write(b)
	return err
}

// event writes one SSE event: an optional event name and id, and data.
func (s *sseWriter) event(name string, id int64, hasID bool, data []byte) error {
	b := make([]byte, 0, len(data)+64)
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	if hasID {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, '\n', '\n')
	return s.write(b)
}

func (s *sseWriter) flush() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	return s.rc.Flush()
}

// streamTask sends a task's stream with enc: it watches the task (the
// watch must already be open, so that an error before the stream starts is
// still an HTTP error), writes the SSE headers, and then passes every update
// to enc until it reports the end, the client goes away, or the watch ends.
// The task goes on whatever happens here: a dropped stream never cancels.
func (a *api) streamTask(w http.ResponseWriter, r *http.Request, wch *gateway.Watch, headers http.Header, enc encoder) {
	defer wch.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	for k, v := range headers {
		h[k] = v
	}
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: a.cfg.WriteTimeout}
	if out.flush() != nil {
		return
	}
	ctx := r.Context()
	var ans answer
	for {
		batch, err := wch.Next(ctx, a.cfg.KeepAlive)
		switch {
		case errors.Is(err, gateway.ErrIdle):
			if out.write([]byte(": keep-alive\n\n")) != nil || out.flush() != nil {
				return
			}
			continue
		case err != nil:
			if !errors.Is(err, gateway.ErrEnded) && ctx.Err() == nil {
				a.core.LogError("compat stream", err)
			}
			return
		}
		// A batch is written, then flushed once.
		for _, u := range batch {
			done, err := enc.update(out, &ans, ans.apply(u))
			if err != nil {
				return
			}
			if done {
				_ = out.flush()
				return
			}
		}
		if out.flush() != nil {
			return
		}
	}
}

// waitEnd follows a task until its attempt ends and returns it as it ended.
// A non-stream request waits with it; the client hanging up stops the wait,
// not the task.
func (a *api) waitEnd(ctx context.Context, user, taskID string) (task.Task, error) {
	for {
		wch, err := a.core.Watch(ctx, user, taskID, false)
		if err != nil {
			return task.Task{}, err
		}
		t, err := a.follow(ctx, wch)
		wch.Close()
		if !errors.Is(err, gateway.ErrSlow) {
			return t, err
		}
		// Fell behind: follow again from a fresh snapshot.
	}
}

// follow folds a watch's updates until the attempt ends.
func (a *api) follow(ctx context.Context, wch *gateway.Watch) (task.Task, error) {
	var ans answer
	for {
		batch, err := wch.Next(ctx, 0)
		if errors.Is(err, gateway.ErrEnded) {
			return ans.task(), nil
		}
		if err != nil {
			return task.Task{}, err
		}
		for _, u := range batch {
			ans.apply(u)
		}
		if ans.t.Status.Terminal() {
			return ans.task(), nil
		}
	}
}
