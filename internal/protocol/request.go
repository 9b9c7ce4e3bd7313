package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/tether-dev/tether/internal/task"
)

// Client message types (PROTOCOL.md section 4, client -> server).
const (
	TypeSubmit        = "submit"
	TypeSubscribe     = "subscribe"
	TypeUnsubscribe   = "unsubscribe"
	TypeCancel        = "cancel"
	TypeHistory       = "history"
	TypeConversations = "conversations"
	TypePing          = "ping"
)

// Limits on client fields that PROTOCOL.md fixes or that keep a frame from
// carrying junk into the store.
const (
	// MaxReqBytes is the longest "req" a client may attach.
	MaxReqBytes = 64
	// MaxCursorBytes bounds an opaque "before" cursor. Cursors are made by the
	// store and are far shorter; anything longer is not one of ours.
	MaxCursorBytes = 1024
)

// Request is one validated client message. Only the fields its Type uses are
// set; Limit is 0 when the client left it out (the store's default applies).
// UUIDs are in lower case.
type Request struct {
	Type           string
	Req            string
	TaskID         string
	ConversationID string
	Content        string
	Before         string
	Limit          int
	// Attachments are the upload ids of a submit (PROTOCOL.md section 10).
	Attachments []string
	// Query is a conversations request's search ("q"): "" lists them all.
	Query string
	// ParentTaskID and VersionOf place a submit's turn (docs/protocol.md,
	// "Versions"): the turn it follows, or a turn it is another version of.
	ParentTaskID string
	VersionOf    string
}

// requestFields lists, per type, the fields DecodeRequest reads. Any other
// member of the object is ignored, so a client may send extra fields (and a
// known field that its type does not use is extra too).
var requestFields = map[string]struct {
	taskID, conversationID, content, page, attachments, query, turn bool
}{
	TypeSubmit:        {taskID: true, conversationID: true, content: true, attachments: true, turn: true},
	TypeSubscribe:     {taskID: true},
	TypeUnsubscribe:   {taskID: true},
	TypeCancel:        {taskID: true},
	TypeHistory:       {conversationID: true, page: true},
	TypeConversations: {page: true, query: true},
	TypePing:          {},
}

// DecodeRequest parses and validates one client frame. Every error is a
// *task.Error: code too_large when content is over task.MaxContentBytes,
// invalid for everything else. When the frame fails after its "req" was read,
// the returned Request carries Req so the error reply can echo it.
//
// JSON null counts as absent. Strings are checked on their raw JSON text, so
// content with bytes that are not UTF-8, or with a \u escape of an unpaired
// UTF-16 surrogate (which encoding/json would silently turn into U+FFFD), is
// invalid rather than altered. Content may not hold U+0000 either: Postgres
// text cannot store it.
func DecodeRequest(data []byte) (Request, error) {
	var r Request
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if json.Valid(data) {
			return r, task.Errorf(task.CodeInvalid, "a message must be a JSON object")
		}
		return r, task.Errorf(task.CodeInvalid, "bad JSON")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return r, task.Errorf(task.CodeInvalid, "bad JSON")
	}

	// req first, so every later error can be echoed with it.
	if raw, ok := present(obj, "req"); ok {
		req, err := decodeString("req", raw)
		if err != nil {
			return r, err
		}
		if len(req) > MaxReqBytes {
			return r, task.Errorf(task.CodeInvalid, "req: longer than %d bytes", MaxReqBytes)
		}
		r.Req = req
	}

	raw, ok := present(obj, "type")
	if !ok {
		return r, task.Errorf(task.CodeInvalid, "type: required")
	}
	typ, err := decodeString("type", raw)
	if err != nil {
		return r, err
	}
	fields, known := requestFields[typ]
	if !known {
		return r, task.Errorf(task.CodeInvalid, "unknown type %s", quoteShort(typ))
	}
	r.Type = typ

	if fields.taskID {
		if r.TaskID, err = decodeUUID(obj, "task_id"); err != nil {
			return r, err
		}
	}
	if fields.conversationID {
		if r.ConversationID, err = decodeUUID(obj, "conversation_id"); err != nil {
			return r, err
		}
	}
	if fields.content {
		if r.Content, err = decodeContent(obj); err != nil {
			return r, err
		}
	}
	if fields.attachments {
		if r.Attachments, err = decodeAttachments(obj); err != nil {
			return r, err
		}
	}
	// A message may be files alone: empty content needs an attachment.
	if fields.content && r.Content == "" && len(r.Attachments) == 0 {
		return r, task.Errorf(task.CodeInvalid, "content: empty")
	}
	if fields.turn {
		if r.ParentTaskID, err = decodeOptionalUUID(obj, "parent_task_id"); err != nil {
			return r, err
		}
		if r.VersionOf, err = decodeOptionalUUID(obj, "version_of"); err != nil {
			return r, err
		}
		if r.ParentTaskID != "" && r.VersionOf != "" {
			return r, task.Errorf(task.CodeInvalid, "parent_task_id and version_of: at most one")
		}
	}
	if fields.query {
		if r.Query, err = decodeQuery(obj); err != nil {
			return r, err
		}
	}
	if fields.page {
		if r.Before, err = decodeCursor(obj); err != nil {
			return r, err
		}
		if r.Limit, err = decodeLimit(obj); err != nil {
			return r, err
		}
	}
	return r, nil
}

// present returns the raw value of a member that exists and is not null.
func present(obj map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// decodeString decodes a member that must be a JSON string.
func decodeString(name string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", task.Errorf(task.CodeInvalid, "%s: must be a string", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", task.Errorf(task.CodeInvalid, "%s: must be a string", name)
	}
	return s, nil
}

func decodeUUID(obj map[string]json.RawMessage, name string) (string, error) {
	raw, ok := present(obj, name)
	if !ok {
		return "", task.Errorf(task.CodeInvalid, "%s: required", name)
	}
	s, err := decodeString(name, raw)
	if err != nil {
		return "", err
	}
	id, ok := NormalizeUUID(s)
	if !ok {
		return "", task.Errorf(task.CodeInvalid, "%s: not a UUID", name)
	}
	return id, nil
}

// decodeOptionalUUID is a UUID member that may be absent (or null): "".
func decodeOptionalUUID(obj map[string]json.RawMessage, name string) (string, error) {
	if _, ok := present(obj, name); !ok {
		return "", nil
	}
	return decodeUUID(obj, name)
}

func decodeContent(obj map[string]json.RawMessage) (string, error) {
	raw, ok := present(obj, "content")
	if !ok {
		return "", task.Errorf(task.CodeInvalid, "content: required")
	}
	s, err := decodeString("content", raw)
	if err != nil {
		return "", err
	}
	if !rawStringIsUTF8(raw) {
		return "", task.Errorf(task.CodeInvalid, "content: not valid UTF-8")
	}
	if len(s) > task.MaxContentBytes {
		return "", task.Errorf(task.CodeTooLarge, "content: longer than %d bytes", task.MaxContentBytes)
	}
	if bytes.IndexByte([]byte(s), 0) >= 0 {
		return "", task.Errorf(task.CodeInvalid, "content: contains U+0000")
	}
	return s, nil
}

func decodeCursor(obj map[string]json.RawMessage) (string, error) {
	raw, ok := present(obj, "before")
	if !ok {
		return "", nil
	}
	s, err := decodeString("before", raw)
	if err != nil {
		return "", err
	}
	if len(s) > MaxCursorBytes {
		return "", task.Errorf(task.CodeInvalid, "before: not a cursor")
	}
	return s, nil
}

// MaxQueryBytes bounds a search query ("q"); the store reads at most 200
// characters of it.
const MaxQueryBytes = 1024

func decodeQuery(obj map[string]json.RawMessage) (string, error) {
	raw, ok := present(obj, "q")
	if !ok {
		return "", nil
	}
	s, err := decodeString("q", raw)
	if err != nil {
		return "", err
	}
	if len(s) > MaxQueryBytes || !rawStringIsUTF8(raw) {
		return "", task.Errorf(task.CodeInvalid, "q: at most %d bytes of UTF-8", MaxQueryBytes)
	}
	return s, nil
}

func decodeLimit(obj map[string]json.RawMessage) (int, error) {
	raw, ok := present(obj, "limit")
	if !ok {
		return 0, nil
	}
	// An integer in JSON number syntax only: "10", 10.0 and 1e1 are refused
	// rather than guessed at.
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 1 || n > task.MaxLimit {
		return 0, task.Errorf(task.CodeInvalid, "limit: must be an integer from 1 to %d", task.MaxLimit)
	}
	return int(n), nil
}

// quoteShort quotes a client string for an error message, cut to a length
// that keeps error replies small.
func quoteShort(s string) string {
	const max = 32
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
