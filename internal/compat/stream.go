package compat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/task"
)

// answer folds a watch's updates into the task as a client of these APIs
// sees it: the snapshot first, then each event applied with task.Apply (the
// rule every reader follows), so its Output is always the answer so far.
type answer struct {
	t   task.Task
	has bool
}

// unbounded is the kept length of an answer that can still grow: nothing a
// client was sent is known to be lost.
const unbounded = int(^uint(0) >> 1)

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
		return kept
	}
	switch a.t.Apply(u.Event) {
	case task.StepStart:
		return u.Event.Keep
	case task.StepGap:
		return -1
	}
	return unbounded
}

// encoder turns the answer into one API's stream. update is called after
// each update with the folded task and how much of the answer before it is
// still its start (answer.apply); it writes what that adds and reports
// whether the stream is over.
type encoder interface {
	update(out *sseWriter, t *task.Task, kept int) (done bool, err error)
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
		u, err := a.next(ctx, wch, out)
		if err != nil {
			if errors.Is(err, gateway.ErrEnded) || ctx.Err() != nil || errors.Is(err, io.ErrClosedPipe) {
				return
			}
			a.core.LogError("compat stream", err)
			return
		}
		kept := ans.apply(u)
		done, err := enc.update(out, &ans.t, kept)
		if err != nil || out.flush() != nil || done {
			return
		}
	}
}

// next waits for the watch's next update, writing a comment line every
// KeepAlive meanwhile so proxies keep the stream open.
func (a *api) next(ctx context.Context, wch *gateway.Watch, out *sseWriter) (gateway.Update, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, a.cfg.KeepAlive)
		u, err := wch.Next(wait)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return u, err
		}
		if err := out.write([]byte(": keep-alive\n\n")); err != nil {
			return u, io.ErrClosedPipe
		}
		if err := out.flush(); err != nil {
			return u, io.ErrClosedPipe
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
		var ans answer
		for {
			u, err := wch.Next(ctx)
			if err != nil {
				wch.Close()
				if errors.Is(err, gateway.ErrEnded) {
					return ans.t, nil
				}
				if errors.Is(err, gateway.ErrSlow) {
					break // follow again from a fresh snapshot
				}
				return task.Task{}, err
			}
			ans.apply(u)
			if ans.t.Status.Terminal() {
				wch.Close()
				return ans.t, nil
			}
		}
	}
}
