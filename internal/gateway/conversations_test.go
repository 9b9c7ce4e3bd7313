package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRenameSearchAndConversationEvents: PATCH renames a conversation and
// every tab of its user hears of it; a search (HTTP ?q=, WebSocket "q")
// finds it by title and by message text; a delete is heard as well; another
// user's conversation answers not_found.
func TestRenameSearchAndConversationEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tb := e.dial("ann")
	other := e.dial("ann")
	taskID, convID := newID(), newID()
	if r := tb.submit(taskID, convID, "tell me about zebras"); r.Type != "submitted" {
		t.Fatalf("submit: %s", r.raw)
	}

	code, out := e.httpDo("PATCH", "/v1/conversations/"+convID, "ann", map[string]any{"title": "  Striped horses "})
	if code != http.StatusOK || out["title"] != "Striped horses" || out["id"] != convID {
		t.Fatalf("rename: %d %v", code, out)
	}
	ev := other.until(func(f frame) bool { return f.Type == "conversation" })
	var renamed struct {
		Action       string `json:"action"`
		Conversation struct {
			ID, Title string
		} `json:"conversation"`
	}
	if err := json.Unmarshal([]byte(ev.raw), &renamed); err != nil || renamed.Action != "renamed" ||
		renamed.Conversation.ID != convID || renamed.Conversation.Title != "Striped horses" {
		t.Fatalf("event: %s", ev.raw)
	}
	for _, c := range []struct {
		user, path string
		body       any
		want       int
	}{
		{"bob", "/v1/conversations/" + convID, map[string]any{"title": "mine"}, http.StatusNotFound},
		{"ann", "/v1/conversations/" + convID, map[string]any{"title": ""}, http.StatusBadRequest},
		{"ann", "/v1/conversations/" + convID, map[string]any{"title": 3}, http.StatusBadRequest},
		{"ann", "/v1/conversations/" + convID, map[string]any{}, http.StatusBadRequest},
		{"ann", "/v1/conversations/nope", map[string]any{"title": "x"}, http.StatusBadRequest},
	} {
		if code, out := e.httpDo("PATCH", c.path, c.user, c.body); code != c.want {
			t.Errorf("PATCH %s as %s with %v: %d %v, want %d", c.path, c.user, c.body, code, out, c.want)
		}
	}

	// Search: by title over HTTP, by message text over WebSocket.
	code, out = e.httpDo("GET", "/v1/conversations?q="+url.QueryEscape("striped"), "ann", nil)
	if cs, _ := out["conversations"].([]any); code != http.StatusOK || len(cs) != 1 {
		t.Fatalf("search by title: %d %v", code, out)
	}
	if code, out := e.httpDo("GET", "/v1/conversations?q=zzz", "bob", nil); code != http.StatusOK || len(out["conversations"].([]any)) != 0 {
		t.Fatalf("bob's search: %d %v", code, out)
	}
	r := tb.call(map[string]any{"type": "conversations", "q": "zebr"})
	if r.Type != "conversations" || !strings.Contains(r.raw, convID) || !strings.Contains(r.raw, `"snippet":"tell me about zebras"`) {
		t.Fatalf("search by text: %s", r.raw)
	}
	if r := tb.call(map[string]any{"type": "conversations", "q": 7}); r.Type != "error" || r.Code != "invalid" {
		t.Fatalf("q of the wrong type: %s", r.raw)
	}
	if r := tb.call(map[string]any{"type": "conversations", "q": "?!"}); r.Type != "error" || r.Code != "invalid" {
		t.Fatalf("q without words: %s", r.raw)
	}
	// The plain list has no snippets.
	if r := tb.call(map[string]any{"type": "conversations"}); strings.Contains(r.raw, "snippet") {
		t.Fatalf("list: %s", r.raw)
	}

	if code, _ := e.httpDo("DELETE", "/v1/conversations/"+convID, "ann", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	ev = other.until(func(f frame) bool { return f.Type == "conversation" })
	if !strings.Contains(ev.raw, `"action":"deleted"`) || !strings.Contains(ev.raw, `"conversation_id":"`+convID+`"`) {
		t.Fatalf("deleted event: %s", ev.raw)
	}
}
