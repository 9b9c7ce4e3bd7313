package protocol

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// Server message types (PROTOCOL.md section 4, server -> client). The
// replies to history and conversations reuse TypeHistory and TypeConversations.
const (
	TypeSubmitted    = "submitted"
	TypeSnapshot     = "snapshot"
	TypeCancelled    = "cancelled"
	TypeUnsubscribed = "unsubscribed"
	TypePong         = "pong"
	TypeTask         = "task"
	TypeError        = "error"
	TypeDelta        = string(task.EventDelta)
	TypeProgress     = string(task.EventProgress)
	TypeStatus       = string(task.EventStatus)
)

// internalErrorFrame is what an encoder returns in the one case encoding/json
// can fail on these types: a time outside years 0..9999. It is still a
// well-formed message, so a client keeps working.
var internalErrorFrame = []byte(`{"type":"error","code":"internal","message":"internal error"}`)

// encode marshals v compactly. encoding/json escapes control characters,
// U+2028 and U+2029 inside strings, so the result never holds a raw newline.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return internalErrorFrame
	}
	return b
}

type taskReply struct {
	Type    string    `json:"type"`
	Req     string    `json:"req,omitempty"`
	Created *bool     `json:"created,omitempty"`
	Task    task.Task `json:"task"`
}

// Submitted is the reply to submit.
func Submitted(req string, t task.Task, created bool) []byte {
	return encode(taskReply{Type: TypeSubmitted, Req: req, Created: &created, Task: t})
}

// Snapshot is the reply to subscribe, and the first SSE event (with req "").
func Snapshot(req string, t task.Task) []byte {
	return encode(taskReply{Type: TypeSnapshot, Req: req, Task: t})
}

// Cancelled is the reply to cancel, with the task as it then stands.
func Cancelled(req string, t task.Task) []byte {
	return encode(taskReply{Type: TypeCancelled, Req: req, Task: t})
}

// Unsubscribed is the reply to unsubscribe.
func Unsubscribed(req, taskID string) []byte {
	return encode(struct {
		Type   string `json:"type"`
		Req    string `json:"req,omitempty"`
		TaskID string `json:"task_id"`
	}{TypeUnsubscribed, req, taskID})
}

// Pong is the reply to ping.
func Pong(req string) []byte {
	return encode(struct {
		Type string `json:"type"`
		Req  string `json:"req,omitempty"`
	}{TypePong, req})
}

// History is the reply to history: messages oldest first, and the cursor of
// the page before them ("" encodes as null: there is none).
func History(req string, msgs []task.Message, next string) []byte {
	msgs = withAttachments(msgs)
	return encode(struct {
		Type     string         `json:"type"`
		Req      string         `json:"req,omitempty"`
		Messages []task.Message `json:"messages"`
		Next     *string        `json:"next"`
	}{TypeHistory, req, msgs, cursor(next)})
}

// Conversations is the reply to conversations, newest activity first.
func Conversations(req string, cs []task.Conversation, next string) []byte {
	if cs == nil {
		cs = []task.Conversation{}
	}
	return encode(struct {
		Type          string              `json:"type"`
		Req           string              `json:"req,omitempty"`
		Conversations []task.Conversation `json:"conversations"`
		Next          *string             `json:"next"`
	}{TypeConversations, req, cs, cursor(next)})
}

// Error is an error reply; req is left out when "".
func Error(req string, code task.Code, message string) []byte {
	return encode(struct {
		Type    string    `json:"type"`
		Req     string    `json:"req,omitempty"`
		Code    task.Code `json:"code"`
		Message string    `json:"message"`
	}{TypeError, req, code, message})
}

// withAttachments returns msgs (never nil) with an attachments list on each
// message, so every Message on the wire carries "attachments" (PROTOCOL.md
// section 10), [] when it has none.
func withAttachments(msgs []task.Message) []task.Message {
	if msgs == nil {
		return []task.Message{}
	}
	var out []task.Message
	for i, m := range msgs {
		if m.Attachments == nil {
			if out == nil {
				out = slices.Clone(msgs)
			}
			out[i].Attachments = []task.Attachment{}
		}
	}
	if out == nil {
		return msgs
	}
	return out
}

func cursor(next string) *string {
	if next == "" {
		return nil
	}
	return &next
}

// taskSummary is a Task without "output", as the "task" event carries it:
// those events go to every tab of a user, and the output can be large.
type taskSummary struct {
	ID             string      `json:"id"`
	ConversationID string      `json:"conversation_id"`
	Status         task.Status `json:"status"`
	Attempt        int         `json:"attempt"`
	Seq            int64       `json:"seq"`
	Progress       int         `json:"progress"`
	Input          string      `json:"input"`
	Error          *string     `json:"error"`
	ResultRef      *string     `json:"result_ref"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
}

// TaskEvent is the "task" event sent to every tab of t's user when t was
// created or changed status.
func TaskEvent(t task.Task) []byte {
	return encode(struct {
		Type string      `json:"type"`
		Task taskSummary `json:"task"`
	}{TypeTask, taskSummary{
		ID: t.ID, ConversationID: t.ConversationID, Status: t.Status, Attempt: t.Attempt,
		Seq: t.Seq, Progress: t.Progress, Input: t.Input, Error: t.Error,
		ResultRef: t.ResultRef, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}})
}
