package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

const (
	testSecret    = "test-secret-0123456789abcdef-0123456789"
	anonCookieKey = "test-cookie-key-0123456789"
)

// env is a whole Tether in one process: a real Postgres schema, a real NATS
// server on a random port, one runner with the demo engine, and a gateway
// behind an httptest server.
type env struct {
	t      testing.TB
	store  *postgres.Store
	bus    *natsbus.Bus
	gw     *gateway.Server
	srv    *httptest.Server
	secret []byte
}

type envOptions struct {
	gateway   gateway.Config
	runner    runner.Config
	noRunner  bool
	wrapStore func(*env, task.Store) task.Store
	anonymous bool
	store     postgres.Config
	// tinyFirstConn shrinks the kernel's send buffer of the first connection
	// the gateway accepts, so a tab that stops reading fills its outbox
	// quickly while other tabs keep ordinary buffers.
	tinyFirstConn bool
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func setup(t testing.TB, opts ...func(*envOptions)) *env {
	t.Helper()
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	store := pgtest.New(t, o.store)
	bus, err := natsbus.Connect(ctx, natstest.Start(t), natsbus.Config{Name: t.Name()})
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(bus.Close)

	if !o.noRunner {
		rc := o.runner
		rc.Logger = quietLogger()
		if rc.Engine == nil {
			rc.Engine, _ = engine.New("demo")
		}
		r, err := runner.New(rc, store, natsrunner.New(bus))
		if err != nil {
			t.Fatalf("runner: %v", err)
		}
		rctx, rstop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(rctx) }()
		t.Cleanup(func() { rstop(); <-done })
	}

	gc := o.gateway
	gc.Logger = quietLogger()
	env := &env{t: t, store: store, bus: bus}
	if o.anonymous {
		gc.CookieKey = []byte(anonCookieKey)
	} else {
		env.secret = []byte(testSecret)
		gc.AuthSecret = env.secret
	}
	var s task.Store = store
	if o.wrapStore != nil {
		s = o.wrapStore(env, store)
	}
	gw, err := gateway.New(gc, s, natsgateway.New(bus))
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	env.gw = gw
	env.srv = httptest.NewUnstartedServer(gw.Handler())
	if o.tinyFirstConn {
		env.srv.Listener = &tinyFirst{Listener: env.srv.Listener}
	}
	env.srv.Start()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Shutdown(sctx)
		env.srv.Close()
	})
	return env
}

// tinyFirst is a listener whose first connection has a 64 KiB send buffer.
type tinyFirst struct {
	net.Listener
	done atomic.Bool
}

func (l *tinyFirst) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && l.done.CompareAndSwap(false, true) {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// tinyReadClient dials with 64 KiB receive buffers (fixed: no autotuning).
var tinyReadClient = &http.Client{Transport: &http.Transport{
	DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(64 << 10)
		}
		return c, err
	},
}}

// token makes a JWT for user, valid for d.
func (e *env) token(user string, d time.Duration) string {
	return signToken(e.t, e.secret, user, time.Now().Add(d))
}

func signToken(t testing.TB, secret []byte, user string, exp time.Time) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user, "exp": exp.Unix()}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (e *env) wsURL() string { return "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/v1/ws" }

// frame is any server message, decoded loosely for assertions.
type frame struct {
	Type          string          `json:"type"`
	Req           string          `json:"req"`
	Created       *bool           `json:"created"`
	Task          *wireTask       `json:"task"`
	TaskID        string          `json:"task_id"`
	Seq           int64           `json:"seq"`
	Text          string          `json:"text"`
	Progress      int             `json:"progress"`
	Status        string          `json:"status"`
	Attempt       int             `json:"attempt"`
	Error         json.RawMessage `json:"error"`
	Code          string          `json:"code"`
	Message       string          `json:"message"`
	Messages      []task.Message  `json:"messages"`
	Conversations []task.Conversation
	Next          *string `json:"next"`
	raw           string
}

type wireTask struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversation_id"`
	Status         string  `json:"status"`
	Attempt        int     `json:"attempt"`
	Seq            int64   `json:"seq"`
	Progress       int     `json:"progress"`
	Input          string  `json:"input"`
	Output         *string `json:"output"`
	Error          *string `json:"error"`
}

// raw2 returns one top-level field of the message as raw JSON.
func (f frame) field(name string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(f.raw), &m)
	return m[name]
}

// tab is a WebSocket client that splits frames into messages.
type tab struct {
	t    testing.TB
	c    *websocket.Conn
	in   chan frame
	done chan struct{}
	err  error // the read error that ended the tab; read after done

	mu   sync.Mutex
	reqN int
}

func (e *env) dial(user string) *tab {
	e.t.Helper()
	tb, resp, err := e.dialHeader(http.Header{"Authorization": {"Bearer " + e.token(user, time.Hour)}})
	if err != nil {
		e.t.Fatalf("dial: %v (%v)", err, resp)
	}
	return tb
}

func (e *env) dialHeader(h http.Header) (*tab, *http.Response, error) {
	return e.dialURL(e.wsURL(), h)
}

func (e *env) dialQuery(token string) (*tab, *http.Response, error) {
	return e.dialURL(e.wsURL()+"?token="+token, nil)
}

func (e *env) dialURL(url string, h http.Header) (*tab, *http.Response, error) {
	tb, resp, err := e.connect(url, h)
	if err == nil {
		go tb.read()
	}
	return tb, resp, err
}

// connect dials without starting the tab's reader.
func (e *env) connect(url string, h http.Header) (*tab, *http.Response, error) {
	return e.connectWith(url, h, nil)
}

func (e *env) connectWith(url string, h http.Header, client *http.Client) (*tab, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: client})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(64 << 20)
	tb := &tab{t: e.t, c: c, in: make(chan frame, 1<<16), done: make(chan struct{})}
	e.t.Cleanup(func() { _ = c.CloseNow() })
	return tb, resp, nil
}

func (tb *tab) read() {
	defer close(tb.done)
	for {
		_, data, err := tb.c.Read(context.Background())
		if err != nil {
			tb.err = err
			return
		}
		for _, line := range bytes.Split(data, []byte{'\n'}) {
			var f frame
			if err := json.Unmarshal(line, &f); err != nil {
				tb.err = errors.New("bad server message: " + string(line))
				return
			}
			f.raw = string(line)
			tb.in <- f
		}
	}
}

func (tb *tab) send(v any) {
	tb.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.sendRaw(websocket.MessageText, b)
}

func (tb *tab) sendRaw(typ websocket.MessageType, b []byte) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tb.c.Write(ctx, typ, b); err != nil {
		tb.t.Fatalf("write: %v", err)
	}
}

// next returns the next message, failing the test after a generous deadline.
func (tb *tab) next() frame {
	tb.t.Helper()
	select {
	case f := <-tb.in:
		return f
	case <-tb.done:
		select {
		case f := <-tb.in:
			return f
		default:
		}
		tb.t.Fatalf("tab closed while waiting: %v", tb.err)
	case <-time.After(eventually.Deadline):
		tb.t.Fatalf("no message within %v", eventually.Deadline)
	}
	return frame{}
}

// until returns the first message matching ok, dropping the others.
func (tb *tab) until(ok func(frame) bool) frame {
	tb.t.Helper()
	for {
		if f := tb.next(); ok(f) {
			return f
		}
	}
}

// call sends a message with a fresh req and returns the reply to it.
func (tb *tab) call(msg map[string]any) frame {
	tb.t.Helper()
	tb.mu.Lock()
	tb.reqN++
	req := "r" + string(rune('a'+tb.reqN%26)) + uuid.NewString()[:8]
	tb.mu.Unlock()
	msg["req"] = req
	tb.send(msg)
	return tb.until(func(f frame) bool { return f.Req == req })
}

// closed waits for the server to close the tab and returns the close code.
func (tb *tab) closed() websocket.StatusCode {
	tb.t.Helper()
	for {
		select {
		case <-tb.in:
		case <-tb.done:
			return websocket.CloseStatus(tb.err)
		case <-time.After(eventually.Deadline):
			tb.t.Fatalf("tab not closed within %v", eventually.Deadline)
		}
	}
}

func newID() string { return uuid.NewString() }

// submit sends a submit and returns the reply.
func (tb *tab) submit(taskID, convID, content string) frame {
	tb.t.Helper()
	return tb.call(map[string]any{"type": "submit", "task_id": taskID, "conversation_id": convID, "content": content})
}

// follower is a client-side model of a subscription: it applies snapshots
// and events as PROTOCOL.md says a client must, and counts what must never
// happen: a seq gap or a repeated seq after a snapshot.
type follower struct {
	taskID  string
	seq     int64
	attempt int
	text    []byte // the output, appended to (a string += per delta is quadratic)
	status  string
	gaps    int
	repeats int
}

func (f *follower) output() string { return string(f.text) }

// apply handles one message; it reports true on the terminal status.
func (f *follower) apply(m frame) bool {
	switch {
	case m.Task != nil && (m.Type == "snapshot" || m.Type == "submitted") && m.Task.ID == f.taskID:
		f.seq, f.attempt, f.status = m.Task.Seq, m.Task.Attempt, m.Task.Status
		if m.Task.Output != nil {
			f.text = append(f.text[:0], *m.Task.Output...)
		}
		return isTerminal(f.status)
	case m.TaskID == f.taskID && (m.Type == "delta" || m.Type == "progress" || m.Type == "status"):
		switch {
		case m.Seq <= f.seq:
			f.repeats++
			return false
		case m.Seq > f.seq+1:
			f.gaps++
		}
		f.seq = m.Seq
		switch m.Type {
		case "delta":
			f.text = append(f.text, m.Text...)
		case "status":
			if m.Attempt > f.attempt {
				f.text = f.text[:0]
			}
			f.attempt, f.status = m.Attempt, m.Status
			return isTerminal(m.Status)
		}
	}
	return false
}

func isTerminal(s string) bool { return s == "done" || s == "failed" || s == "cancelled" }

// httpDo sends an HTTP request as user and decodes the JSON answer.
func (e *env) httpDo(method, path, user string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+e.token(user, time.Hour))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
