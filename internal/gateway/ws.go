package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// maxOutFrame caps one coalesced server frame; a burst larger than this is
// written as several frames.
const maxOutFrame = 256 << 10

// serveWS upgrades GET /v1/ws after authentication and the Origin rule. The
// handler returns once the connection is taken over: the tab's read loop
// runs in a goroutine of its own (with a small stack, where the handler's
// grew while it parsed the request), and everything else of the tab starts
// only when there is work.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	id, err := s.auth.authenticate(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkOrigin(r, id, s.cfg.AllowedOrigins); err != nil {
		writeError(w, task.Errorf(task.CodeForbidden, "origin not allowed"))
		return
	}
	if !s.openTab(w, id.user) {
		return
	}
	released := false
	defer func() {
		if !released {
			s.tabs.release(id.user)
		}
	}()
	if id.newCookie != nil {
		http.SetCookie(w, id.newCookie)
	}
	// The tab follows its user's task events from before the upgrade
	// completes, so nothing submitted after the client sees the 101 is missed.
	ss := newSession(s, id)
	if err := s.users.attach(id.user, ss); err != nil {
		s.log.Warn("subscribe user events", "err", err)
		writeError(w, task.Unavailable("event bus", err))
		return
	}
	// Origin was checked above with the rule of PROTOCOL.md, which differs
	// from the library's (a token-authenticated client may omit it).
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.users.detach(id.user, ss)
		s.log.Debug("websocket accept", "err", err)
		return
	}
	c.SetReadLimit(protocol.MaxFrameBytes)
	ss.c = c
	if !s.track(ss) {
		s.users.detach(id.user, ss)
		_ = c.Close(protocol.CloseServiceRestart, "gateway shutting down")
		return
	}
	released = true
	go func() {
		defer s.tabs.release(id.user)
		defer s.users.detach(id.user, ss)
		defer s.untrack(ss)
		ss.run()
	}()
}

// wsSession is one tab. Its read loop never stops reading; everything else
// runs only while there is something to do: a worker while requests wait
// (they are handled in order), a writer while messages are queued, a ping
// when the ping timer fires. So an idle tab is one goroutine, parked in a
// read.
type wsSession struct {
	s   *Server
	c   *websocket.Conn
	id  identity
	out *outbox

	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// follows are the tab's followers, one a task, at most
	// MaxSubscriptions: a slice, scanned by task, costs a tab following one
	// task a pointer, where a map costs a few hundred bytes.
	follows []*follower
	// queue holds the frames of requests waiting for the worker (which
	// decodes them), in order; working says the worker runs. pending counts
	// requests waiting or running (cancels run beside the queue),
	// MaxPending at most.
	queue   [][]byte
	pending int
	working bool
	// ended: the read loop returned; nothing more is started.
	ended bool

	// ping fires every PingInterval; writeTimer ends a write that takes
	// longer than WriteTimeout (made by the first write).
	ping       *time.Timer
	writeTimer *time.Timer

	closeOnce sync.Once
	// closeDone is closed when a close handshake started by close() ended.
	closeDone chan struct{}
	drainOnce sync.Once
	// wg counts the worker, the writer, running cancels and pings.
	wg sync.WaitGroup
}

// newSession makes a tab's session; its connection is set once accepted.
func newSession(s *Server, id identity) *wsSession {
	ctx, cancel := context.WithCancel(s.ctx)
	ss := &wsSession{s: s, id: id, ctx: ctx, cancel: cancel, closeDone: make(chan struct{})}
	ss.out = newSpawningOutbox(s.cfg.QueueBytes, func() {
		s.metrics.queueDrops.Inc()
		ss.close(protocol.CloseTryAgainLater, "too slow to take events; resubscribe")
	}, func() {
		ss.wg.Add(1)
		go ss.writeLoop()
	})
	return ss
}

func (ss *wsSession) run() {
	ss.out.begin()
	ss.ping = time.AfterFunc(ss.s.cfg.PingInterval, ss.pingOnce)
	if !ss.id.exp.IsZero() {
		t := time.AfterFunc(ss.id.exp.Sub(ss.s.cfg.Now()), func() {
			ss.close(websocket.StatusPolicyViolation, "token expired")
		})
		defer t.Stop()
	}

	ss.readLoop()
	ss.cancel()
	ss.mu.Lock()
	ss.ended = true
	ss.mu.Unlock()
	ss.ping.Stop()
	// No push starts a writer after this: the outbox is closed (what it
	// holds can still be written by a writer that runs).
	ss.out.close()
	ss.wg.Wait()
	ss.stopFollows()
	// Let a close handshake in progress send its code before the socket goes.
	ss.closeOnce.Do(func() { close(ss.closeDone) })
	<-ss.closeDone
	_ = ss.c.CloseNow()
}

func (ss *wsSession) readLoop() {
	for {
		typ, data, err := ss.c.Read(ss.ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			ss.close(protocol.CloseUnsupportedData, "binary frames are not supported")
			return
		}
		if !utf8.Valid(data) {
			ss.close(protocol.CloseInvalidPayload, "text frame is not valid UTF-8")
			return
		}
		// A refusal is decoded here, for its req; a request the tab may
		// make is decoded by the worker, so this goroutine, parked between
		// messages for the tab's whole life, keeps the small stack it
		// started with (encoding/json runs deep).
		if !ss.s.limit.allow(ss.id.user) {
			req, _ := protocol.DecodeRequest(data)
			ss.s.metrics.rateLimited.Inc()
			ss.send(protocol.Error(req.Req, task.CodeRateLimited, "too many requests; slow down"))
			continue
		}
		if !ss.enqueue(data) {
			req, _ := protocol.DecodeRequest(data)
			ss.s.metrics.limitRefusals.WithLabelValues(limitPending).Inc()
			ss.send(protocol.Error(req.Req, task.CodeRateLimited,
				fmt.Sprintf("too many requests in flight on this connection (%d); wait for replies", ss.s.cfg.MaxPending)))
		}
	}
}

// enqueue queues a request for the worker, starting it if it does not run;
// false when MaxPending requests are waiting or running.
func (ss *wsSession) enqueue(req []byte) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.pending >= ss.s.cfg.MaxPending {
		return false
	}
	ss.pending++
	ss.queue = append(ss.queue, req)
	if !ss.working {
		ss.working = true
		ss.wg.Add(1)
		go ss.workLoop()
	}
	return true
}

// done frees the slot of a handled request.
func (ss *wsSession) done() {
	ss.mu.Lock()
	ss.pending--
	ss.mu.Unlock()
}

// workLoop handles the queued requests in order and ends when none is left.
func (ss *wsSession) workLoop() {
	defer ss.wg.Done()
	for {
		ss.mu.Lock()
		if len(ss.queue) == 0 {
			ss.queue = nil // an idle tab keeps no queue
			ss.working = false
			ss.mu.Unlock()
			return
		}
		data := ss.queue[0]
		ss.queue[0] = nil
		ss.queue = ss.queue[1:]
		ss.mu.Unlock()
		if ss.ctx.Err() != nil {
			ss.done()
			continue
		}
		req, err := protocol.DecodeRequest(data)
		if err != nil {
			ss.send(protocol.Error(req.Req, task.ErrorCode(err), task.ErrorMessage(err)))
			ss.done()
			continue
		}
		if req.Type != "cancel" {
			ss.handle(req)
			ss.done()
			continue
		}
		ss.handle(req) // frees its slot when the cancel ends
	}
}

func (ss *wsSession) handle(req protocol.Request) {
	s, user := ss.s, ss.id.user
	fail := func(err error) {
		s.logError("ws "+req.Type, err, "task_id", req.TaskID)
		ss.send(protocol.Error(req.Req, task.ErrorCode(err), task.ErrorMessage(err)))
	}
	switch req.Type {
	case "submit":
		if err := ss.submitTask(req); err != nil {
			fail(err)
		}
	case "subscribe":
		if err := ss.subscribeTask(req); err != nil {
			fail(err)
		}
	case "unsubscribe":
		ss.unfollow(req.TaskID)
		ss.send(protocol.Unsubscribed(req.Req, req.TaskID))
	case "cancel":
		// A cancel may wait for the runner; it must not hold up the tab's
		// other requests.
		ss.wg.Add(1)
		go func() {
			defer ss.wg.Done()
			defer ss.done()
			t, err := s.cancelTask(ss.ctx, user, req.TaskID)
			if err != nil {
				fail(err)
				return
			}
			ss.send(protocol.Cancelled(req.Req, t))
		}()
	case "history":
		ctx, cancel := s.requestContext(ss.ctx)
		defer cancel()
		msgs, next, err := s.store.History(ctx, user, req.ConversationID, task.Page{Before: req.Before, Limit: req.Limit})
		if err != nil {
			fail(err)
			return
		}
		ss.send(protocol.History(req.Req, msgs, next))
	case "conversations":
		ctx, cancel := s.requestContext(ss.ctx)
		defer cancel()
		var (
			cs   []task.Conversation
			next string
			err  error
		)
		if p := (task.Page{Before: req.Before, Limit: req.Limit}); req.Query != "" {
			cs, next, err = s.store.SearchConversations(ctx, user, req.Query, p)
		} else {
			cs, next, err = s.store.Conversations(ctx, user, p)
		}
		if err != nil {
			fail(err)
			return
		}
		ss.send(protocol.Conversations(req.Req, cs, next))
	case "ping":
		ss.send(protocol.Pong(req.Req))
	default:
		fail(task.Errorf(task.CodeInvalid, "unknown message type"))
	}
}

// submitTask follows the task it submits: subscribe, then write, then
// dispatch. The follower is attached before the task is written, so a task
// created here has all its events on the live feed; the reply (submitted,
// with the snapshot) goes out before any of them.
func (ss *wsSession) submitTask(req protocol.Request) error {
	f, err := ss.attach(req.TaskID)
	if err != nil {
		return err
	}
	ctx, cancel := ss.s.requestContext(ss.ctx)
	defer cancel()
	res, err := ss.s.submit(ctx, ss.id.user, task.SubmitRequest{TaskID: req.TaskID,
		ConversationID: req.ConversationID, Content: req.Content, Attachments: req.Attachments,
		ParentTaskID: req.ParentTaskID, VersionOf: req.VersionOf})
	if err != nil {
		f.stop()
		return err
	}
	from := existingTask // a repeated submit: the task has a past
	if res.Created {
		from = createdAfterAttach
	}
	f.start(res.Task, protocol.Submitted(req.Req, res.Task, res.Created), from)
	ss.keep(req.TaskID, f)
	return nil
}

// subscribeTask follows an existing task: subscribe, then read the
// snapshot, then catch up from the log.
func (ss *wsSession) subscribeTask(req protocol.Request) (err error) {
	span := ss.s.startResume(ss.ctx, ss.id.user, req.TaskID, "ws")
	defer func() { tracing.End(span, err) }()
	f, err := ss.attach(req.TaskID)
	if err != nil {
		return err
	}
	ctx, cancel := ss.s.requestContext(ss.ctx)
	defer cancel()
	t, err := ss.s.store.Get(ctx, ss.id.user, req.TaskID)
	if err != nil {
		f.stop()
		return err
	}
	resumed(span, t)
	f.start(t, protocol.Snapshot(req.Req, t), existingTask)
	ss.keep(req.TaskID, f)
	return nil
}

// attach replaces the tab's follower of a task, if any, with a new one
// attached to the live feed, so events are never doubled; it refuses past
// the tab's subscription limit.
func (ss *wsSession) attach(taskID string) (*follower, error) {
	ss.unfollow(taskID)
	ss.mu.Lock()
	n := len(ss.follows)
	ss.mu.Unlock()
	if n >= ss.s.cfg.MaxSubscriptions {
		ss.s.metrics.limitRefusals.WithLabelValues(limitSubscriptions).Inc()
		return nil, task.Errorf(task.CodeRateLimited, "too many subscriptions on this connection (%d); unsubscribe first", ss.s.cfg.MaxSubscriptions)
	}
	return ss.s.attach(ss.ctx, ss.id.user, taskID, tabSink{ss})
}

// keep records f as the tab's follower of taskID.
func (ss *wsSession) keep(taskID string, f *follower) {
	ss.mu.Lock()
	if i := ss.followIndex(taskID); i >= 0 {
		ss.follows[i] = f
	} else {
		ss.follows = append(ss.follows, f)
	}
	ss.mu.Unlock()
}

// followIndex is where the tab's follower of taskID is in follows, -1 for
// none; ss.mu is held.
func (ss *wsSession) followIndex(taskID string) int {
	for i, f := range ss.follows {
		if f.taskID == taskID {
			return i
		}
	}
	return -1
}

func (ss *wsSession) unfollow(taskID string) {
	ss.mu.Lock()
	var f *follower
	if i := ss.followIndex(taskID); i >= 0 {
		f = ss.follows[i]
		last := len(ss.follows) - 1
		ss.follows[i], ss.follows[last] = ss.follows[last], nil
		ss.follows = ss.follows[:last]
		if last == 0 {
			ss.follows = nil
		}
	}
	ss.mu.Unlock()
	if f != nil {
		f.stop()
	}
}

func (ss *wsSession) stopFollows() {
	ss.mu.Lock()
	fs := ss.follows
	ss.follows = nil
	ss.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

// send queues a message; when the queue overflows the tab is closed 1013.
func (ss *wsSession) send(b []byte) bool {
	return ss.out.push(b)
}

// writeLoop writes what is queued, coalesced into frames, and ends when the
// queue is empty; the outbox starts it again when messages arrive.
func (ss *wsSession) writeLoop() {
	defer ss.wg.Done()
	for {
		items, ok := ss.out.next()
		if !ok {
			return
		}
		for len(items) > 0 {
			var frame []byte
			frame, items = coalesce(items)
			if err := ss.write(frame); err != nil {
				ss.cancel()
				// Take nothing more: the tab is going.
				ss.out.close()
				for {
					if _, ok := ss.out.next(); !ok {
						return
					}
				}
			}
		}
	}
}

// write sends one frame, bounded by WriteTimeout. The deadline is a timer of
// the tab's, reset for each frame, that closes the connection when it
// fires: the write is given a context without a deadline, so no timer,
// context or callback is made per frame.
func (ss *wsSession) write(frame []byte) error {
	if ss.writeTimer == nil {
		ss.writeTimer = time.AfterFunc(ss.s.cfg.WriteTimeout, func() { _ = ss.c.CloseNow() })
	} else {
		ss.writeTimer.Reset(ss.s.cfg.WriteTimeout)
	}
	err := ss.c.Write(context.Background(), websocket.MessageText, frame)
	ss.writeTimer.Stop()
	return err
}

// coalesce joins queued messages into one frame (newline-separated, as
// PROTOCOL.md section 4 allows) up to maxOutFrame, returning the rest.
func coalesce(items [][]byte) ([]byte, [][]byte) {
	if len(items) == 1 {
		return items[0], nil
	}
	n, size := 0, 0
	for n < len(items) && (n == 0 || size+1+len(items[n]) <= maxOutFrame) {
		size += len(items[n]) + 1
		n++
	}
	if n == 1 {
		return items[0], items[1:]
	}
	return bytes.Join(items[:n], []byte{'\n'}), items[n:]
}

// pingOnce pings the tab (from the ping timer's goroutine) and arms the
// timer again; a tab whose pong does not come within PongTimeout is dropped.
func (ss *wsSession) pingOnce() {
	ss.mu.Lock()
	if ss.ended {
		ss.mu.Unlock()
		return
	}
	ss.wg.Add(1)
	ss.mu.Unlock()
	defer ss.wg.Done()
	ctx, cancel := context.WithTimeout(ss.ctx, ss.s.cfg.PongTimeout)
	err := ss.c.Ping(ctx)
	cancel()
	if err != nil {
		if ss.ctx.Err() == nil {
			ss.s.log.Debug("dropping tab that did not answer a ping", "err", err)
			_ = ss.c.CloseNow()
		}
		return
	}
	ss.ping.Reset(ss.s.cfg.PingInterval)
}

// close ends the tab with a close code (once). The close handshake runs in
// its own goroutine so no caller waits on a slow peer.
func (ss *wsSession) close(code websocket.StatusCode, reason string) {
	ss.closeOnce.Do(func() {
		ss.out.close()
		go func() {
			defer close(ss.closeDone)
			_ = ss.c.Close(code, reason)
			ss.cancel()
		}()
	})
}

// shutdown writes what is queued, then closes the tab with 1012.
func (ss *wsSession) shutdown(ctx context.Context) {
	ss.stopFollows()
	ss.drainOnce.Do(ss.out.drain)
	select {
	case <-ss.out.flushed:
	case <-ss.ctx.Done():
	case <-ctx.Done():
	}
	ss.closeOnce.Do(func() {
		defer close(ss.closeDone)
		ss.out.close()
		_ = ss.c.Close(protocol.CloseServiceRestart, "gateway restarting; reconnect")
		ss.cancel()
	})
	<-ss.ctx.Done()
}

// tabSink delivers a follower's snapshots and events to a tab.
type tabSink struct{ ss *wsSession }

func (k tabSink) sendSnapshot(t task.Task, reply []byte) bool {
	if reply == nil {
		reply = protocol.Snapshot("", t)
	}
	return k.ss.send(reply)
}

func (k tabSink) sendEvent(m task.Msg) bool { return k.ss.send(m.Data) }

func (k tabSink) waitRoom(ctx context.Context) { k.ss.out.waitRoom(ctx) }

var _ sink = tabSink{}
