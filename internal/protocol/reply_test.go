package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

func ptr[T any](v T) *T { return &v }

var (
	t0 = time.Date(2025, 1, 2, 3, 4, 5, 600000000, time.UTC)
	t1 = time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC)

	sampleTask = task.Task{
		ID: tid, ConversationID: cid, Status: task.StatusRunning, Attempt: 2, Seq: 42,
		Progress: 37, Input: "user text", Output: "assistant\n<text>", CreatedAt: t0, UpdatedAt: t1,
		UserID: "secret-user", RunnerID: "r1", StreamPos: 99,
	}
	sampleTaskJSON = `{"id":"` + tid + `","conversation_id":"` + cid + `","status":"running","attempt":2,"seq":42,"progress":37,` +
		`"input":"user text","output":"assistant\n\u003ctext\u003e","error":null,"result_ref":null,` +
		`"created_at":"2025-01-02T03:04:05.6Z","updated_at":"2025-01-02T03:04:06Z"}`
	failedTask = task.Task{
		ID: tid, ConversationID: cid, Status: task.StatusFailed, Attempt: 1, Seq: 3,
		Input: "in", Output: "out", Error: ptr("demo failure"), ResultRef: ptr("ref1"), CreatedAt: t0, UpdatedAt: t0,
	}
)

func TestEncodersGolden(t *testing.T) {
	t.Parallel()
	msgs := []task.Message{
		{ID: "m1", ConversationID: cid, Role: task.RoleUser, Content: "hi", TaskID: ptr(tid), CreatedAt: t0},
		{ID: "m2", ConversationID: cid, Role: task.RoleAssistant, Content: "", TaskID: ptr(tid), Status: ptr("generating"), CreatedAt: t1},
	}
	convs := []task.Conversation{{ID: cid, Title: "T", UpdatedAt: t0, ActiveTaskID: ptr(tid)}, {ID: "c2", Title: "", UpdatedAt: t0}}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"submitted created", Submitted("r1", sampleTask, true), `{"type":"submitted","req":"r1","created":true,"task":` + sampleTaskJSON + `}`},
		{"submitted existing no req", Submitted("", sampleTask, false), `{"type":"submitted","created":false,"task":` + sampleTaskJSON + `}`},
		{"snapshot", Snapshot("s", sampleTask), `{"type":"snapshot","req":"s","task":` + sampleTaskJSON + `}`},
		{"snapshot sse", Snapshot("", sampleTask), `{"type":"snapshot","task":` + sampleTaskJSON + `}`},
		{"cancelled", Cancelled("c", sampleTask), `{"type":"cancelled","req":"c","task":` + sampleTaskJSON + `}`},
		{"unsubscribed", Unsubscribed("u", tid), `{"type":"unsubscribed","req":"u","task_id":"` + tid + `"}`},
		{"pong", Pong("p"), `{"type":"pong","req":"p"}`},
		{"pong no req", Pong(""), `{"type":"pong"}`},
		{"history", History("h", msgs, "cur"), `{"type":"history","req":"h","messages":[` +
			`{"id":"m1","conversation_id":"` + cid + `","role":"user","content":"hi","task_id":"` + tid + `","status":null,"created_at":"2025-01-02T03:04:05.6Z","attachments":[],"parent_task_id":null},` +
			`{"id":"m2","conversation_id":"` + cid + `","role":"assistant","content":"","task_id":"` + tid + `","status":"generating","created_at":"2025-01-02T03:04:06Z","attachments":[],"parent_task_id":null}` +
			`],"next":"cur"}`},
		{"history empty", History("", nil, ""), `{"type":"history","messages":[],"next":null}`},
		{"conversations", Conversations("c", convs, ""), `{"type":"conversations","req":"c","conversations":[` +
			`{"id":"` + cid + `","title":"T","updated_at":"2025-01-02T03:04:05.6Z","active_task_id":"` + tid + `"},` +
			`{"id":"c2","title":"","updated_at":"2025-01-02T03:04:05.6Z","active_task_id":null}],"next":null}`},
		{"conversations empty", Conversations("", nil, "n"), `{"type":"conversations","conversations":[],"next":"n"}`},
		{"error", Error("e", task.CodeNotFound, "no such task"), `{"type":"error","req":"e","code":"not_found","message":"no such task"}`},
		{"error no req", Error("", task.CodeInvalid, "bad\nJSON"), `{"type":"error","code":"invalid","message":"bad\nJSON"}`},
		{"task event", TaskEvent(failedTask), `{"type":"task","task":{"id":"` + tid + `","conversation_id":"` + cid +
			`","status":"failed","attempt":1,"seq":3,"progress":0,"input":"in","error":"demo failure","result_ref":"ref1",` +
			`"created_at":"2025-01-02T03:04:05.6Z","updated_at":"2025-01-02T03:04:05.6Z"}}`},
		{"task body", TaskBody(sampleTask), sampleTaskJSON},
		{"messages page", MessagesPage(nil, "x"), `{"messages":[],"next":"x"}`},
		{"conversations page", ConversationsPage(nil, ""), `{"conversations":[],"next":null}`},
		{"http error", HTTPError(task.CodeTooLarge, "too big"), `{"error":{"code":"too_large","message":"too big"}}`},
		{"delta", EncodeEvent(task.Event{Type: task.EventDelta, TaskID: tid, Seq: 5, Text: "t1 ", Progress: 9, Attempt: 3}),
			`{"type":"delta","task_id":"` + tid + `","seq":5,"attempt":3,"text":"t1 "}`},
		{"delta empty text", EncodeEvent(task.Event{Type: task.EventDelta, TaskID: tid, Seq: 5, Attempt: 1}),
			`{"type":"delta","task_id":"` + tid + `","seq":5,"attempt":1,"text":""}`},
		{"progress", EncodeEvent(task.Event{Type: task.EventProgress, TaskID: tid, Seq: 6, Attempt: 1, Progress: 50, Text: "x"}),
			`{"type":"progress","task_id":"` + tid + `","seq":6,"attempt":1,"progress":50}`},
		{"progress stage", EncodeEvent(task.Event{Type: task.EventProgress, TaskID: tid, Seq: 6, Attempt: 2, Progress: 0, Stage: "search"}),
			`{"type":"progress","task_id":"` + tid + `","seq":6,"attempt":2,"progress":0,"stage":"search"}`},
		{"status", EncodeEvent(task.Event{Type: task.EventStatus, TaskID: tid, Seq: 1, Status: task.StatusRunning, Attempt: 1}),
			`{"type":"status","task_id":"` + tid + `","seq":1,"status":"running","attempt":1,"error":null,"result_ref":null,"keep":0}`},
		{"status continued", EncodeEvent(task.Event{Type: task.EventStatus, TaskID: tid, Seq: 40, Status: task.StatusPending, Attempt: 2, Keep: 37}),
			`{"type":"status","task_id":"` + tid + `","seq":40,"status":"pending","attempt":2,"error":null,"result_ref":null,"keep":37}`},
		{"status done has no keep", EncodeEvent(task.Event{Type: task.EventStatus, TaskID: tid, Seq: 41, Status: task.StatusDone, Attempt: 2, Keep: 37}),
			`{"type":"status","task_id":"` + tid + `","seq":41,"status":"done","attempt":2,"error":null,"result_ref":null}`},
		{"status failed", EncodeEvent(task.Event{Type: task.EventStatus, TaskID: tid, Seq: 9, Status: task.StatusFailed, Attempt: 2, Error: ptr("no_runner"), ResultRef: ptr("r")}),
			`{"type":"status","task_id":"` + tid + `","seq":9,"status":"failed","attempt":2,"error":"no_runner","result_ref":"r"}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
		if bytes.ContainsAny(tt.got, "\n\r") {
			t.Errorf("%s: raw newline in %q", tt.name, tt.got)
		}
		if !json.Valid(tt.got) {
			t.Errorf("%s: invalid JSON", tt.name)
		}
	}
}

// A time encoding/json cannot write must still give a well-formed message.
func TestEncodeUnencodableTime(t *testing.T) {
	t.Parallel()
	bad := sampleTask
	bad.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	got := Snapshot("r", bad)
	if string(got) != string(internalErrorFrame) {
		t.Fatalf("got %s", got)
	}
}

// Line separators inside strings must never reach a client raw: they would
// split a coalesced frame in some JavaScript parsers.
func TestEncodeEscapesLineBreaks(t *testing.T) {
	t.Parallel()
	got := EncodeEvent(task.Event{Type: task.EventDelta, TaskID: tid, Seq: 1, Text: "a\nb\r\u2028\u2029\x00"})
	if bytes.ContainsAny(got, "\n\r\u2028\u2029") {
		t.Fatalf("raw line break in %q", got)
	}
}
