package protocol

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tether-dev/tether/internal/task"
)

// TypeConversation is the user-level event that says a conversation was
// renamed or deleted, sent to every tab of its user like "task" events
// (docs/protocol.md, "Conversations").
const TypeConversation = "conversation"

// Actions of a "conversation" event.
const (
	ConversationRenamed = "renamed"
	ConversationDeleted = "deleted"
)

// ConversationRenamedEvent is {"type":"conversation","action":"renamed","conversation":Conversation}.
func ConversationRenamedEvent(c task.Conversation) []byte {
	return encode(struct {
		Type         string            `json:"type"`
		Action       string            `json:"action"`
		Conversation task.Conversation `json:"conversation"`
	}{TypeConversation, ConversationRenamed, c})
}

// ConversationDeletedEvent is {"type":"conversation","action":"deleted","conversation_id":id}.
func ConversationDeletedEvent(id string) []byte {
	return encode(struct {
		Type           string `json:"type"`
		Action         string `json:"action"`
		ConversationID string `json:"conversation_id"`
	}{TypeConversation, ConversationDeleted, id})
}

// ConversationBody is the body of PATCH /v1/conversations/{id}: the
// Conversation as it then stands.
func ConversationBody(c task.Conversation) []byte { return encode(c) }

// DecodeRename reads the body of PATCH /v1/conversations/{id}:
// {"title":"..."}, a string (the store checks its length and characters).
func DecodeRename(body []byte) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return "", task.Errorf(task.CodeInvalid, "body must be a JSON object")
	}
	raw, ok := present(obj, "title")
	if !ok {
		return "", task.Errorf(task.CodeInvalid, "title: required")
	}
	title, err := decodeString("title", raw)
	if err != nil {
		return "", err
	}
	if !rawStringIsUTF8(raw) || bytes.IndexByte([]byte(title), 0) >= 0 {
		return "", task.Errorf(task.CodeInvalid, "title: not valid text")
	}
	return strings.TrimSpace(title), nil
}
