package compat

import (
	"strings"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// namespace is the fixed UUIDv5 namespace of the ids these endpoints derive
// (docs/protocol.md, section 11).
var namespace = uuid.MustParse("5f6d1c0e-8a43-4d8e-9a51-7e2b3c4d5e6f")

// derive is the UUIDv5 of a user's name for something: the same user and
// name always give the same id, and no two users share one.
func derive(user, name string) string {
	return uuid.NewSHA1(namespace, []byte(user+"\n"+name)).String()
}

const maxKeyBytes = 255

// taskIDFor is the task id of a request: its Idempotency-Key when that is a
// UUID, else a UUIDv5 of (user, key); without a key, a new random id.
func taskIDFor(user, key string) (string, error) {
	if key == "" {
		return uuid.NewString(), nil
	}
	if len(key) > maxKeyBytes {
		return "", badParam("Idempotency-Key", "the Idempotency-Key header is over %d bytes", maxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", badParam("Idempotency-Key", "the Idempotency-Key header must be printable ASCII")
		}
	}
	if id, ok := protocol.NormalizeUUID(key); ok {
		return id, nil
	}
	return derive(user, "idempotency-key\n"+key), nil
}

// ownConversation is the conversation of a task that named none: derived
// from the task id, so a repeated request names the same one.
func ownConversation(taskID string) string {
	return uuid.NewSHA1(namespace, []byte(taskID+"\nconversation")).String()
}

// conversationFor is the conversation id a client's chat id names: the id
// itself when it is a UUID, else a UUIDv5 of (user, chat id).
func conversationFor(user, chatID string) string {
	if id, ok := protocol.NormalizeUUID(chatID); ok {
		return id
	}
	return derive(user, "chat\n"+chatID)
}

// itemID is the id of a task's answer as an OpenAI output item and an AI SDK
// message: msg_<task id without dashes>.
func itemID(taskID string) string { return "msg_" + strings.ReplaceAll(taskID, "-", "") }

// textPartID is the id of an answer's text part in the UI message stream.
func textPartID(taskID string) string { return "text_" + strings.ReplaceAll(taskID, "-", "") }

// validateText refuses what Postgres cannot store (U+0000).
func validateText(param, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return badParam(param, "%s must not contain U+0000", param)
	}
	return nil
}

// checkContent applies the submit's content limits of section 4.
func checkContent(param, s string) error {
	switch {
	case s == "":
		return badParam(param, "the last user message has no text")
	case len(s) > task.MaxContentBytes:
		return &paramError{param: param, err: task.Errorf(task.CodeTooLarge,
			"the last user message is %d bytes; at most %d are allowed", len(s), task.MaxContentBytes)}
	}
	return validateText(param, s)
}
