package protocol

import (
	"encoding/json"

	"github.com/tether-dev/tether/internal/task"
)

// decodeAttachments reads a submit's optional "attachments": an array of
// upload ids (UUIDs, lower-cased), at most task.MaxAttachments, none twice.
// Absent, null and [] all mean none.
func decodeAttachments(obj map[string]json.RawMessage) ([]string, error) {
	raw, ok := present(obj, "attachments")
	if !ok {
		return nil, nil
	}
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, task.Errorf(task.CodeInvalid, "attachments: must be an array of upload ids")
	}
	if len(items) == 0 {
		return nil, nil
	}
	if len(items) > task.MaxAttachments {
		return nil, task.Errorf(task.CodeInvalid, "attachments: at most %d a message, got %d", task.MaxAttachments, len(items))
	}
	ids := make([]string, 0, len(items))
	for _, item := range items {
		s, err := decodeString("attachments", item)
		if err != nil {
			return nil, task.Errorf(task.CodeInvalid, "attachments: must be an array of upload ids")
		}
		id, ok := NormalizeUUID(s)
		if !ok {
			return nil, task.Errorf(task.CodeInvalid, "attachments: %s is not an upload id", quoteShort(s))
		}
		ids = append(ids, id)
	}
	if err := task.CheckAttachments(ids); err != nil {
		return nil, err
	}
	return ids, nil
}
