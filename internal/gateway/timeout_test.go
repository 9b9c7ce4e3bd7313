package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// hold runs statement in a transaction of its own that stays open, holding
// what it locked, until release or the end of the test: a stuck request, a
// frozen runner, a migration rewriting a table.
func (e *env) hold(statement string, args ...any) (release func()) {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.store.Pool().Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, statement, args...); err != nil {
		_ = tx.Rollback(ctx)
		e.t.Fatalf("%s: %v", statement, err)
	}
	release = func() { _ = tx.Rollback(ctx) }
	e.t.Cleanup(release)
	return release
}

// pendingTask submits a task through the store (no runner claims it).
func (e *env) pendingTask(user string) task.Task {
	e.t.Helper()
	res, err := e.store.Submit(context.Background(), task.SubmitRequest{UserID: user, TaskID: newID(),
		ConversationID: newID(), Content: "hi"})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Task
}

// TestLockedRowAnswersUnavailable: with a task's row held FOR UPDATE by
// another transaction, a cancel over HTTP and one over WebSocket answer
// unavailable (the first a 503) instead of hanging with the holder, and
// the tab keeps serving; once the row is free the cancel goes through.
func TestLockedRowAnswersUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) {
		o.noRunner = true
		o.store = postgres.Config{LockTimeout: 50 * time.Millisecond}
	})
	tk := e.pendingTask("ann")
	release := e.hold(`SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE`, tk.ID)

	code, out := e.httpDo("POST", "/v1/tasks/"+tk.ID+"/cancel", "ann", nil)
	if code != http.StatusServiceUnavailable || errCode(out) != "unavailable" {
		t.Fatalf("HTTP cancel of a held task: %d %v", code, out)
	}
	tb := e.dial("ann")
	if f := tb.call(map[string]any{"type": "cancel", "task_id": tk.ID}); f.Type != "error" || f.Code != "unavailable" {
		t.Fatalf("WebSocket cancel of a held task: %s", f.raw)
	}
	if f := tb.call(map[string]any{"type": "ping"}); f.Type != "pong" {
		t.Fatalf("the tab after an unavailable cancel: %s", f.raw)
	}

	release()
	if f := tb.call(map[string]any{"type": "cancel", "task_id": tk.ID}); f.Type != "cancelled" {
		t.Fatalf("cancel once the row is free: %s", f.raw)
	}
}

// TestHeldTableAnswersUnavailable: with the tables held by another
// transaction (as a migration that rewrites them holds them), WebSocket
// history and conversations and the HTTP messages page answer unavailable:
// through lock_timeout, and with a lock_timeout too long to matter,
// through the request deadline.
func TestHeldTableAnswersUnavailable(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]func(*envOptions){
		"lock timeout": func(o *envOptions) {
			o.store = postgres.Config{LockTimeout: 50 * time.Millisecond}
		},
		"request deadline": func(o *envOptions) {
			o.store = postgres.Config{LockTimeout: time.Hour, StatementTimeout: time.Hour}
			o.gateway = gateway.Config{RequestTimeout: 50 * time.Millisecond}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, o, func(o *envOptions) { o.noRunner = true })
			tk := e.pendingTask("ann")
			tb := e.dial("ann")
			e.hold(`LOCK TABLE messages, conversations IN ACCESS EXCLUSIVE MODE`)
			if f := tb.call(map[string]any{"type": "history", "conversation_id": tk.ConversationID}); f.Type != "error" || f.Code != "unavailable" {
				t.Fatalf("history of a held table: %s", f.raw)
			}
			if f := tb.call(map[string]any{"type": "conversations"}); f.Type != "error" || f.Code != "unavailable" {
				t.Fatalf("conversations of a held table: %s", f.raw)
			}
			code, out := e.httpDo("GET", "/v1/conversations/"+tk.ConversationID+"/messages", "ann", nil)
			if code != http.StatusServiceUnavailable || errCode(out) != "unavailable" {
				t.Fatalf("HTTP messages of a held table: %d %v", code, out)
			}
		})
	}
}
