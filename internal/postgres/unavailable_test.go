package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/task"
)

// cutProxy forwards TCP to Postgres until cut, which closes every
// connection and refuses new ones: the database gone from under the pool.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.shut)
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

func (p *cutProxy) shut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestOutageIsUnavailable: with the database gone (connections dropped,
// new ones refused) every store call answers task.CodeUnavailable, never
// internal, and keeps the cause for the logs; a wrong request is still
// what it was.
func TestOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, base.Host)
	base.Host = p.ln.Addr().String()
	ctx := context.Background()
	s, err := postgres.Open(ctx, base.String(), postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tk := submit(t, s, "alice", newID(), newID(), "hello").Task

	p.shut()
	_, err = s.Get(ctx, "alice", tk.ID)
	wantCode(t, err, task.CodeUnavailable)
	if task.ErrorMessage(err) != "database unavailable; try again shortly" || errors.Unwrap(err) == nil {
		t.Errorf("message %q, cause %v", task.ErrorMessage(err), errors.Unwrap(err))
	}
	_, err = s.Submit(ctx, task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "x"})
	wantCode(t, err, task.CodeUnavailable)
	_, _, err = s.Conversations(ctx, "alice", task.Page{})
	wantCode(t, err, task.CodeUnavailable)
	_, err = s.Heartbeat(ctx, tk.ID, 1)
	wantCode(t, err, task.CodeUnavailable)
	wantCode(t, s.Ping(ctx), task.CodeUnavailable)
	// Checked before the database is asked: still invalid.
	_, err = s.Get(ctx, "alice", "not-a-uuid")
	wantCode(t, err, task.CodeInvalid)
}

// TestRetriesAreBounded: a user may retry one failed task MaxRetries times;
// the next retry is a conflict whose cause says why, and changes nothing.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{MaxRetries: 2})
	ctx := context.Background()
	taskID, convID := newID(), newID()
	fail := func() {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, `UPDATE tasks SET status = 'failed', error = 'x', finished_at = updated_at
			WHERE id = $1`, taskID); err != nil {
			t.Fatal(err)
		}
	}
	submit(t, s, "alice", taskID, convID, "q")
	for range 2 {
		fail()
		if res := submit(t, s, "alice", taskID, convID, "q"); !res.Retried {
			t.Fatalf("retry refused: %+v", res)
		}
	}
	fail()
	_, err := s.Submit(ctx, task.SubmitRequest{UserID: "alice", TaskID: taskID, ConversationID: convID, Content: "q"})
	wantCode(t, err, task.CodeConflict)
	if !errors.Is(err, task.ErrTooManyRetries) {
		t.Fatalf("cause: %v", err)
	}
	got, err := s.Load(ctx, taskID)
	if err != nil || got.Status != task.StatusFailed || got.Attempt != 3 {
		t.Fatalf("after the refused retry: %+v %v", got, err)
	}
}
