package protocol

import (
	"net/http"

	"github.com/tether-dev/tether/internal/task"
)

// HTTPStatus maps an error code to its HTTP status (PROTOCOL.md section 5).
// An unknown code is an internal error.
func HTTPStatus(code task.Code) int {
	switch code {
	case task.CodeInvalid:
		return http.StatusBadRequest
	case task.CodeUnauthorized:
		return http.StatusUnauthorized
	case task.CodeForbidden:
		return http.StatusForbidden
	case task.CodeNotFound:
		return http.StatusNotFound
	case task.CodeConflict:
		return http.StatusConflict
	case task.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case task.CodeRateLimited:
		return http.StatusTooManyRequests
	case task.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// SetRetryAfter tells the client of an unavailable answer (a dependency is
// down, PROTOCOL.md section 7) to try again in a second; other codes are
// not worth retrying as they are.
func SetRetryAfter(h http.Header, code task.Code) {
	if code == task.CodeUnavailable {
		h.Set("Retry-After", "1")
	}
}

// HTTPError is the body of an HTTP error: {"error":{"code":..,"message":..}}.
func HTTPError(code task.Code, message string) []byte {
	type body struct {
		Code    task.Code `json:"code"`
		Message string    `json:"message"`
	}
	return encode(struct {
		Error body `json:"error"`
	}{body{code, message}})
}

// MessagesPage is the body of GET /v1/conversations/{id}/messages.
func MessagesPage(msgs []task.Message, next string) []byte {
	msgs = withAttachments(msgs)
	return encode(struct {
		Messages []task.Message `json:"messages"`
		Next     *string        `json:"next"`
	}{msgs, cursor(next)})
}

// ConversationsPage is the body of GET /v1/conversations.
func ConversationsPage(cs []task.Conversation, next string) []byte {
	if cs == nil {
		cs = []task.Conversation{}
	}
	return encode(struct {
		Conversations []task.Conversation `json:"conversations"`
		Next          *string             `json:"next"`
	}{cs, cursor(next)})
}

// TaskBody is the body of the HTTP task endpoints: the Task object alone.
func TaskBody(t task.Task) []byte { return encode(t) }
