package protocol

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	for code, want := range map[task.Code]int{
		task.CodeInvalid: 400, task.CodeUnauthorized: 401, task.CodeForbidden: 403,
		task.CodeNotFound: 404, task.CodeConflict: 409, task.CodeTooLarge: 413,
		task.CodeRateLimited: 429, task.CodeUnavailable: 503, task.CodeInternal: 500,
		"": 500, "something_new": 500,
	} {
		if got := HTTPStatus(code); got != want {
			t.Errorf("HTTPStatus(%q) = %d, want %d", code, got, want)
		}
	}
}

func TestSSEEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		typ  string
		id   int64
		data string
		want string
	}{
		{"with id", "delta", 7, `{"type":"delta"}`, "event: delta\nid: 7\ndata: {\"type\":\"delta\"}\n\n"},
		{"no id", "snapshot", 0, `{}`, "event: snapshot\ndata: {}\n\n"},
		{"multi-line data", "x", 1, "a\r\nb\nc", "event: x\nid: 1\ndata: a\ndata: b\ndata: c\n\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		if err := SSEEvent(&b, tt.typ, tt.id, []byte(tt.data)); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, b.String(), tt.want)
		}
	}
	var b strings.Builder
	if err := SSEComment(&b, "keep-alive"); err != nil || b.String() != ": keep-alive\n\n" {
		t.Errorf("SSEComment: %q, %v", b.String(), err)
	}
}
