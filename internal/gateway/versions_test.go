package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestVersionSubmits: a submit with version_of (WebSocket) or parent_task_id
// (HTTP) places its turn, history says where each turn stands, a repeat is a
// lookup, and a turn that is not in the conversation is invalid.
func TestVersionSubmits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tb := e.dial("ann")
	conv, a, b := newID(), newID(), newID()
	if r := tb.submit(a, conv, "/stream 2 0"); r.Type != "submitted" {
		t.Fatalf("submit a: %s", r.raw)
	}
	regen := map[string]any{"type": "submit", "task_id": b, "conversation_id": conv, "content": "/stream 2 0", "version_of": a}
	if r := tb.call(regen); r.Type != "submitted" || !json.Valid([]byte(r.raw)) {
		t.Fatalf("regenerate: %s", r.raw)
	}
	if r := tb.call(regen); r.Type != "submitted" || r.Created == nil || *r.Created {
		t.Fatalf("repeat: %s", r.raw)
	}
	c := newID()
	code, out := e.httpDo("POST", "/v1/tasks", "ann", map[string]any{"task_id": c, "conversation_id": conv, "content": "next", "parent_task_id": a})
	if code != http.StatusCreated {
		t.Fatalf("POST with parent_task_id: %d %v", code, out)
	}
	code, out = e.httpDo("GET", "/v1/conversations/"+conv+"/messages", "ann", nil)
	if code != http.StatusOK {
		t.Fatalf("history: %d %v", code, out)
	}
	parents := map[string]any{}
	for _, m := range out["messages"].([]any) {
		msg := m.(map[string]any)
		parents[msg["task_id"].(string)] = msg["parent_task_id"]
	}
	if parents[a] != nil || parents[b] != nil || parents[c] != a {
		t.Fatalf("parents: %v", parents)
	}
	for _, bad := range []map[string]any{
		{"type": "submit", "task_id": newID(), "conversation_id": conv, "content": "x", "version_of": newID()},
		{"type": "submit", "task_id": newID(), "conversation_id": conv, "content": "x", "version_of": a, "parent_task_id": a},
		{"type": "submit", "task_id": newID(), "conversation_id": conv, "content": "x", "parent_task_id": "nope"},
	} {
		if r := tb.call(bad); r.Type != "error" || r.Code != "invalid" {
			t.Errorf("%v: %s", bad, r.raw)
		}
	}
}
