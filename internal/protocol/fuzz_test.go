package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tether-dev/tether/internal/task"
)

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"submit","req":"r1","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"hi"}`,
		`{"type":"subscribe","task_id":"` + tid + `"}`,
		`{"type":"unsubscribe","task_id":"` + tid + `"}`,
		`{"type":"cancel","req":"x","task_id":"` + strings.ToUpper(tid) + `"}`,
		`{"type":"history","conversation_id":"` + cid + `","before":"abc","limit":50}`,
		`{"type":"conversations","limit":1}`,
		`{"type":"ping"}`,
		`{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"\ud83d\ude00\u0000"}`,
		`[1]`, `null`, `{`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data)
		if err != nil {
			var te *task.Error
			if !errors.As(err, &te) {
				t.Fatalf("error %v is %T, not *task.Error", err, err)
			}
			if te.Code != task.CodeInvalid && te.Code != task.CodeTooLarge {
				t.Fatalf("unexpected code %q", te.Code)
			}
			if len(r.Req) > MaxReqBytes {
				t.Fatalf("echoed req of %d bytes", len(r.Req))
			}
			return
		}
		checkRequest(t, r)
		// Re-encoding what was accepted must decode to the same request.
		again, err := DecodeRequest(encodeRequest(r))
		if err != nil {
			t.Fatalf("re-decode of %+v: %v", r, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("re-decode: got %+v, want %+v", again, r)
		}
	})
}

// checkRequest re-validates a decoded Request independently of the decoder.
func checkRequest(t *testing.T, r Request) {
	t.Helper()
	if _, ok := requestFields[r.Type]; !ok {
		t.Fatalf("unknown type %q accepted", r.Type)
	}
	if len(r.Req) > MaxReqBytes {
		t.Fatalf("req of %d bytes accepted", len(r.Req))
	}
	for _, id := range []string{r.TaskID, r.ConversationID} {
		if id == "" {
			continue
		}
		if n, ok := NormalizeUUID(id); !ok || n != id {
			t.Fatalf("id %q not a normalised UUID", id)
		}
	}
	f := requestFields[r.Type]
	if f.taskID != (r.TaskID != "") || f.conversationID != (r.ConversationID != "") || f.content != (r.Content != "") {
		t.Fatalf("fields of %q do not match its type: %+v", r.Type, r)
	}
	if f.content && (len(r.Content) > task.MaxContentBytes || !utf8.ValidString(r.Content) || strings.ContainsRune(r.Content, 0)) {
		t.Fatalf("bad content accepted: %q", r.Content)
	}
	if !f.page && (r.Before != "" || r.Limit != 0) {
		t.Fatalf("page fields on %q", r.Type)
	}
	if r.Limit < 0 || r.Limit > task.MaxLimit {
		t.Fatalf("limit %d accepted", r.Limit)
	}
	if len(r.Attachments) > 0 && !f.attachments {
		t.Fatalf("attachments on %q", r.Type)
	}
	if len(r.Attachments) > task.MaxAttachments || task.CheckAttachments(r.Attachments) != nil {
		t.Fatalf("attachments %v accepted", r.Attachments)
	}
	for _, id := range r.Attachments {
		if n, ok := NormalizeUUID(id); !ok || n != id {
			t.Fatalf("attachment %q not a normalised UUID", id)
		}
	}
}

// encodeRequest writes r back as a client frame.
func encodeRequest(r Request) []byte {
	m := map[string]any{"type": r.Type}
	if r.Req != "" {
		m["req"] = r.Req
	}
	if r.TaskID != "" {
		m["task_id"] = r.TaskID
	}
	if r.ConversationID != "" {
		m["conversation_id"] = r.ConversationID
	}
	if r.Content != "" {
		m["content"] = r.Content
	}
	if r.Before != "" {
		m["before"] = r.Before
	}
	if r.Limit != 0 {
		m["limit"] = r.Limit
	}
	if len(r.Attachments) > 0 {
		m["attachments"] = r.Attachments
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzDecodeEvent(f *testing.F) {
	for _, e := range []task.Event{
		{Type: task.EventDelta, TaskID: tid, Seq: 1, Text: "t1 "},
		{Type: task.EventProgress, TaskID: tid, Seq: 2, Progress: 50, Stage: "s"},
		{Type: task.EventStatus, TaskID: tid, Seq: 3, Status: task.StatusFailed, Attempt: 1, Error: ptr("e"), ResultRef: ptr("r")},
	} {
		f.Add(EncodeEvent(e))
	}
	f.Add([]byte(`{"type":"status","task_id":"x","seq":1,"status":"done","attempt":1,"error":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEvent(data)
		if err != nil {
			if !errors.Is(err, ErrBadEvent) {
				t.Fatalf("error %v does not wrap ErrBadEvent", err)
			}
			return
		}
		if e.Seq < 1 || e.TaskID == "" {
			t.Fatalf("accepted %+v", e)
		}
		again, err := DecodeEvent(EncodeEvent(e))
		if err != nil {
			t.Fatalf("re-decode of %+v: %v", e, err)
		}
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip: got %+v, want %+v", again, e)
		}
	})
}
