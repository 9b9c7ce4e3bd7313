package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// The gateway's core, for the encoders of other APIs (internal/compat,
// PROTOCOL.md section 11) that the gateway mounts: the same auth, submit,
// cancel and follower as the WebSocket and SSE paths, so that another API is
// another encoding of one task's snapshot and events, never a second
// implementation of the resume rule.

type mount struct {
	pattern string
	handler http.Handler
}

// Mount routes pattern (http.ServeMux syntax) to h, behind the gateway's
// logging, CORS and connection limits. It must be called before Handler.
func (s *Server) Mount(pattern string, h http.Handler) {
	s.mounts = append(s.mounts, mount{pattern, h})
}

// Caller authenticates an API request as the JSON endpoints of section 5 do:
// a bearer token (or, in anonymous mode, an API key or the session cookie),
// an allowed Origin on a cookie write, the per-user rate. It sets a new or
// renewed session cookie on w. The error carries a task.Code.
func (s *Server) Caller(w http.ResponseWriter, r *http.Request) (string, error) {
	id, err := s.auth.authenticate(r, false)
	if err != nil {
		return "", err
	}
	// A cookie-authenticated write must come from an allowed page
	// (PROTOCOL.md section 1): a foreign Origin is cross-site request
	// forgery, and a missing one is refused too, since browsers send
	// Origin on every write and other clients use a bearer token.
	if id.viaCookie && r.Method != http.MethodGet && r.Method != http.MethodHead {
		if o := r.Header.Get("Origin"); o == "" || !originAllowed(o, s.cfg.AllowedOrigins, r.Host) {
			return "", task.Errorf(task.CodeForbidden, "a cookie-authenticated write needs an allowed Origin")
		}
	}
	if id.newCookie != nil {
		http.SetCookie(w, id.newCookie)
	}
	if !s.limit.allow(id.user) {
		s.metrics.rateLimited.Inc()
		return "", task.Errorf(task.CodeRateLimited, "too many requests; slow down")
	}
	return id.user, nil
}

// Submit is the submit of section 4 (created, found, or retried), with the
// dispatch and the announcement to the user's tabs.
func (s *Server) Submit(ctx context.Context, user string, req task.SubmitRequest) (task.SubmitResult, error) {
	return s.submit(ctx, user, req)
}

// Task reads a task of the user.
func (s *Server) Task(ctx context.Context, user, taskID string) (task.Task, error) {
	return s.store.Get(ctx, user, taskID)
}

// Cancel is the cancel of section 4: it waits (bounded) for a running task's
// runner to write the cancelled status.
func (s *Server) Cancel(ctx context.Context, user, taskID string) (task.Task, error) {
	return s.cancelTask(ctx, user, taskID)
}

// History is a page of a conversation's messages, oldest first.
func (s *Server) History(ctx context.Context, user, conversationID string, p task.Page) ([]task.Message, string, error) {
	return s.store.History(ctx, user, conversationID, p)
}

// LogError logs an error of a mounted handler as the gateway's own are.
func (s *Server) LogError(what string, err error) { s.logError(what, err) }

// Update is one thing a Watch delivers: a snapshot (the first, or a resync
// when the log could not close a gap), or the next event after it in
// (attempt, seq) order.
type Update struct {
	Snapshot *task.Task
	Event    task.Event
}

// ErrSlow ends a Watch whose reader fell a queue behind (as 1013 ends a tab).
var ErrSlow = task.Errorf(task.CodeUnavailable, "the client fell too far behind; resume the stream")

// Watch follows one task for a mounted encoder: first a snapshot, then every
// event after it, exactly once and in order, with the follower of the
// WebSocket and SSE paths. It counts as one of the user's open tabs.
type Watch struct {
	s    *Server
	f    *follower
	user string

	mu      sync.Mutex
	queue   []Update
	bytes   int
	max     int
	slow    bool
	ended   bool
	wake    chan struct{}
	room    chan struct{}
	release sync.Once
	// idle times Next's wait; only the reader uses it.
	idle *time.Timer
}

// Watch attaches to a task of the user. It fails with not_found for a task
// the user does not have, rate_limited past the user's open tabs and
// unavailable when the bus is away. Close it when done.
//
// With replay, the watch starts from the task's first event rather than its
// snapshot, so a replay shows the answer in the deltas the live stream had:
// an empty snapshot of the task before its first event comes first, then
// the events, read from the gateway's recent events or the log (as an SSE
// resume from Last-Event-ID 0 is). Where the events cannot be had (a task
// on a later attempt, one of more than maxReplayEvents events, a log that
// was purged) the watch starts from the snapshot as without replay.
func (s *Server) Watch(ctx context.Context, user, taskID string, replay bool) (*Watch, error) {
	if !s.tabs.acquire(user) {
		s.metrics.limitRefusals.WithLabelValues(limitTabs).Inc()
		return nil, task.Errorf(task.CodeRateLimited,
			"too many open streams for this user on this server (%d); close some", s.cfg.MaxTabsPerUser)
	}
	span := s.startResume(ctx, user, taskID, "watch")
	w := &Watch{s: s, user: user, max: s.cfg.QueueBytes, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	s.streams.Add(1)
	s.metrics.sseStreams.Inc()
	f := newFollower(ctx, s.hub, taskID, w, func(ctx context.Context) (task.Task, error) {
		return s.store.Get(ctx, user, taskID)
	})
	if err := s.hub.attach(f); err != nil {
		w.done()
		s.log.Warn("watch: attach", "task_id", taskID, "err", err)
		err = task.Unavailable("event bus", err)
		tracing.End(span, err)
		return nil, err
	}
	t, err := s.store.Get(ctx, user, taskID)
	if err != nil {
		f.stop()
		w.done()
		tracing.End(span, err)
		return nil, err
	}
	resumed(span, t)
	w.f = f
	// The catch-up waits for the reader between batches, so it runs while
	// the caller reads.
	if replay && t.Attempt == 1 && t.Seq <= maxReplayEvents {
		if logged, at, ok := s.resumeAt(ctx, t, 0); ok {
			w.push(Update{Snapshot: beforeFirstEvent(t)}, false)
			f.spawn(func() { f.startAt(at, logged, task.PositionOf(t)); span.End() })
			return w, nil
		}
	}
	f.spawn(func() { f.start(t, nil, existingTask); span.End() })
	return w, nil
}

// maxReplayEvents bounds a replay from the first event: longer answers are
// replayed from their snapshot, not read through the log event by event.
const maxReplayEvents = 4096

// beforeFirstEvent is t as it stood before its first event: what a replay
// from the first event folds the events into.
func beforeFirstEvent(t task.Task) *task.Task {
	t.Status, t.Seq, t.Progress, t.Output, t.Keep = task.StatusPending, 0, 0, "", 0
	t.Error, t.ResultRef, t.StreamPos = nil, nil, 0
	return &t
}

// Next returns the updates queued since the last call, in order, waiting
// for at least one; after idle with none (0: no limit) it returns ErrIdle,
// so a stream can send a keep-alive. After the terminal event of an
// attempt, or a terminal snapshot, it returns ErrEnded; a reader that fell
// behind gets ErrSlow; the gateway's shutdown, unavailable.
func (w *Watch) Next(ctx context.Context, idle time.Duration) ([]Update, error) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			batch := w.queue
			w.queue, w.bytes = nil, 0
			w.mu.Unlock()
			select {
			case w.room <- struct{}{}:
			default:
			}
			return batch, nil
		}
		slow, ended := w.slow, w.ended
		w.mu.Unlock()
		switch {
		case slow:
			return nil, ErrSlow
		case ended:
			return nil, ErrEnded
		}
		var timeout <-chan time.Time
		if idle > 0 {
			if w.idle == nil {
				w.idle = time.NewTimer(idle)
			} else {
				w.idle.Reset(idle)
			}
			timeout = w.idle.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.s.ctx.Done():
			return nil, task.Errorf(task.CodeUnavailable, "the server is restarting; resume the stream")
		case <-timeout:
			return nil, ErrIdle
		case <-w.wake:
		}
	}
}

// ErrIdle: nothing came within the idle time Next was given.
var ErrIdle = errors.New("watch idle")

// ErrEnded: the attempt ended and everything up to its end was delivered.
var ErrEnded = errors.New("stream ended")

// Close detaches the watch; the task goes on.
func (w *Watch) Close() {
	w.f.stop()
	if w.idle != nil {
		w.idle.Stop()
	}
	w.done()
}

func (w *Watch) done() {
	w.release.Do(func() {
		w.s.tabs.release(w.user)
		w.s.metrics.sseStreams.Dec()
		w.s.streams.Done()
	})
}

func updateSize(u Update) int {
	if u.Snapshot != nil {
		return 256 + len(u.Snapshot.Output)
	}
	return 128 + len(u.Event.Text)
}

// push queues an update; it reports false once the watch is over.
func (w *Watch) push(u Update, last bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.slow || w.ended {
		return false
	}
	if w.bytes+updateSize(u) > w.max {
		w.slow = true
		w.queue, w.bytes = nil, 0
		w.s.metrics.queueDrops.Inc()
	} else {
		w.queue = append(w.queue, u)
		w.bytes += updateSize(u)
		w.ended = last
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return !w.slow && !last
}

func (w *Watch) sendSnapshot(t task.Task, _ []byte) bool {
	return w.push(Update{Snapshot: &t}, t.Status.Terminal())
}

func (w *Watch) sendEvent(m task.Msg) bool {
	if m.Event.Type == task.EventProgress {
		// What the ordering needs is peeked already; the value is not
		// what these encoders send.
		return w.push(Update{Event: m.Event}, false)
	}
	e, err := protocol.DecodeEvent(m.Data)
	if err != nil {
		// The bus decoded it once already; a copy that does not decode
		// again is a bug, and the reader resyncs from a fresh stream.
		w.s.log.Error("watch: decode event", "task_id", m.Event.TaskID, "seq", m.Event.Seq, "err", err)
		w.mu.Lock()
		w.slow = true
		w.mu.Unlock()
		return false
	}
	return w.push(Update{Event: e}, e.Terminal())
}

func (w *Watch) waitRoom(ctx context.Context) {
	for {
		w.mu.Lock()
		ok := w.bytes <= w.max/2 || w.slow || w.ended
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-w.room:
		}
	}
}
