package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/task"
)

// flakyBus is the real bus with failures switched on by the test.
type flakyBus struct {
	gateway.Bus
	noSubscribe atomic.Bool
	cancels     atomic.Int32

	mu         sync.Mutex
	dispatched []error // the context's error at each Dispatch
}

var errBusDown = errors.New("nats: connection reconnecting")

func (b *flakyBus) SubscribeTask(id string, fn func(task.Msg), lost func()) (func() error, error) {
	if b.noSubscribe.Load() {
		return nil, task.Unavailable("event bus", errBusDown)
	}
	return b.Bus.SubscribeTask(id, fn, lost)
}

func (b *flakyBus) RequestCancel(ctx context.Context, id string) error {
	b.cancels.Add(1)
	return b.Bus.RequestCancel(ctx, id)
}

func (b *flakyBus) Dispatch(ctx context.Context, id string, attempt int) error {
	b.mu.Lock()
	b.dispatched = append(b.dispatched, ctx.Err())
	b.mu.Unlock()
	return b.Bus.Dispatch(ctx, id, attempt)
}

// DispatchAsync's context carries only the trace context, never a
// cancellation: it is recorded as nil.
func (b *flakyBus) DispatchAsync(ctx context.Context, id string, attempt int) error {
	b.mu.Lock()
	b.dispatched = append(b.dispatched, nil)
	b.mu.Unlock()
	return b.Bus.DispatchAsync(ctx, id, attempt)
}

// flakyGateway is a second gateway of e, on a flaky bus and optionally a
// wrapped store.
func flakyGateway(t *testing.T, e *env, wrap func(task.Store) task.Store) (*flakyBus, *env) {
	t.Helper()
	fb := &flakyBus{Bus: natsgateway.New(e.bus)}
	var s task.Store = e.store
	if wrap != nil {
		s = wrap(s)
	}
	gw, err := gateway.New(gateway.Config{AuthSecret: e.secret, Logger: quietLogger(), CancelWait: 10 * time.Second}, s, fb)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
		srv.Close()
	})
	return fb, &env{t: t, store: e.store, bus: e.bus, gw: gw, srv: srv, secret: e.secret}
}

// TestCancelWithoutLiveFeed: when the gateway cannot follow the task it
// cancels, the cancel still reaches the runner (the message is sent and the
// request is recorded) and the answer comes at once with the task as it
// stands, instead of an error swallowed into nothing.
func TestCancelWithoutLiveFeed(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	taskID := newID()
	if code, _ := e.httpDo("POST", "/v1/tasks", "gus", map[string]string{"task_id": taskID,
		"conversation_id": newID(), "content": "hi"}); code != http.StatusCreated {
		t.Fatal(code)
	}
	if _, err := e.store.Claim(context.Background(), task.Claim{TaskID: taskID, RunnerID: "r1"}); err != nil {
		t.Fatal(err)
	}
	fb, f := flakyGateway(t, e, nil)
	fb.noSubscribe.Store(true)
	start := time.Now()
	code, body := f.httpDo("POST", "/v1/tasks/"+taskID+"/cancel", "gus", nil)
	if code != http.StatusOK || body["status"] != "running" {
		t.Fatalf("cancel: %d %v", code, body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel waited %v with no live feed to wait on", d)
	}
	if fb.cancels.Load() != 1 {
		t.Errorf("the runner was not told: %d cancel messages", fb.cancels.Load())
	}
	var requested bool
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT cancel_requested FROM tasks WHERE id = $1`,
		taskID).Scan(&requested); err != nil || !requested {
		t.Errorf("cancel not recorded: %v %v", requested, err)
	}
}

// TestBusDownIsUnavailable: a subscribe (WebSocket) or stream (SSE) the
// gateway cannot attach to the bus answers unavailable / 503.
func TestBusDownIsUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	taskID := newID()
	if code, _ := e.httpDo("POST", "/v1/tasks", "hal", map[string]string{"task_id": taskID,
		"conversation_id": newID(), "content": "hi"}); code != http.StatusCreated {
		t.Fatal(code)
	}
	fb, f := flakyGateway(t, e, nil)
	fb.noSubscribe.Store(true)
	tb := f.dial("hal")
	if r := tb.call(map[string]any{"type": "subscribe", "task_id": taskID}); r.Code != "unavailable" {
		t.Fatalf("subscribe with the bus down: %s", r.raw)
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/v1/tasks/"+taskID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+f.token("hal", time.Hour))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || errorBody(t, resp.Body) != "unavailable" {
		t.Fatalf("SSE with the bus down: %d", resp.StatusCode)
	}
}

// hangUpAfterSubmit cancels the request's context as soon as the submit is
// committed: the client hung up right after.
type hangUpAfterSubmit struct {
	task.Store
	hangUp context.CancelFunc
}

func (h hangUpAfterSubmit) Submit(ctx context.Context, req task.SubmitRequest) (task.SubmitResult, error) {
	res, err := h.Store.Submit(ctx, req)
	h.hangUp()
	return res, err
}

// TestAnnounceOutlivesRequest: the dispatch after a committed submit does
// not run on the request's context (a new task's is not waited for at all),
// so a client that hangs up right after the commit does not cancel it.
func TestAnnounceOutlivesRequest(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	fb, f := flakyGateway(t, e, func(s task.Store) task.Store { return hangUpAfterSubmit{s, hangUp} })
	body := `{"task_id":"` + newID() + `","conversation_id":"` + newID() + `","content":"hi"}`
	req := httptest.NewRequestWithContext(ctx, "POST", "/v1/tasks", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.token("ida", time.Hour))
	rec := httptest.NewRecorder()
	f.gw.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.dispatched) != 1 || fb.dispatched[0] != nil {
		t.Fatalf("dispatch contexts: %v (the request's was cancelled: %v)", fb.dispatched, ctx.Err())
	}
}

// errorBody is the code of an HTTP error body.
func errorBody(t testing.TB, r io.Reader) string {
	t.Helper()
	var out struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.NewDecoder(r).Decode(&out)
	return out.Error.Code
}
