package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

const (
	tid = "0190f3c4-5b6a-7c8d-9e0f-112233445566"
	cid = "7d444840-9dc0-11d1-b245-5ffdce74fad2"
)

func TestDecodeRequestValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want Request
	}{
		{"submit", `{"type":"submit","req":"r1","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"hi"}`,
			Request{Type: "submit", Req: "r1", TaskID: tid, ConversationID: cid, Content: "hi"}},
		{"submit upper-case uuids normalised", `{"type":"submit","task_id":"` + strings.ToUpper(tid) + `","conversation_id":"` + strings.ToUpper(cid) + `","content":"x"}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: "x"}},
		{"submit content at the limit", `{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"` + strings.Repeat("a", task.MaxContentBytes) + `"}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: strings.Repeat("a", task.MaxContentBytes)}},
		{"submit escaped surrogate pair and U+FFFD", `{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"\ud83d\ude00 \ufffd é\n"}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: "😀 \ufffd é\n"}},
		{"submit with attachments, normalised, in order", `{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","attachments":["` + strings.ToUpper(cid) + `","` + tid + `"]}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: "x", Attachments: []string{cid, tid}}},
		{"submit with no attachments", `{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","attachments":[]}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: "x"}},
		{"submit files without text", `{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"","attachments":["` + cid + `"]}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: "", Attachments: []string{cid}}},
		{"submit, a version of a turn", `{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","version_of":"` + strings.ToUpper(cid) + `","parent_task_id":null}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: "x", VersionOf: cid}},
		{"submit after a turn", `{"type":"submit","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","parent_task_id":"` + cid + `"}`,
			Request{Type: "submit", TaskID: tid, ConversationID: cid, Content: "x", ParentTaskID: cid}},
		{"conversations search", `{"type":"conversations","q":"zebra stripes","limit":5}`, Request{Type: "conversations", Query: "zebra stripes", Limit: 5}},
		{"a search field on another type is ignored", `{"type":"history","conversation_id":"` + cid + `","q":"x","version_of":"nope"}`, Request{Type: "history", ConversationID: cid}},
		{"subscribe", `{"type":"subscribe","task_id":"` + tid + `"}`, Request{Type: "subscribe", TaskID: tid}},
		{"unsubscribe", `{"type":"unsubscribe","req":"","task_id":"` + tid + `"}`, Request{Type: "unsubscribe", TaskID: tid}},
		{"cancel", `{"type":"cancel","req":"c","task_id":"` + tid + `"}`, Request{Type: "cancel", Req: "c", TaskID: tid}},
		{"history defaults", `{"type":"history","conversation_id":"` + cid + `"}`, Request{Type: "history", ConversationID: cid}},
		{"history page", `{"type":"history","conversation_id":"` + cid + `","before":"abc","limit":200}`,
			Request{Type: "history", ConversationID: cid, Before: "abc", Limit: 200}},
		{"history null optionals", `{"type":"history","conversation_id":"` + cid + `","before":null,"limit":null,"req":null}`,
			Request{Type: "history", ConversationID: cid}},
		{"conversations", `{"type":"conversations"}`, Request{Type: "conversations"}},
		{"conversations page", `{"type":"conversations","before":"x","limit":1}`, Request{Type: "conversations", Before: "x", Limit: 1}},
		{"ping", `{"type":"ping","req":"p"}`, Request{Type: "ping", Req: "p"}},
		{"ping with whitespace", " \n{ \"type\" : \"ping\" }\n", Request{Type: "ping"}},
		{"extra fields ignored", `{"type":"ping","foo":[1,2],"task_id":5,"limit":"x"}`, Request{Type: "ping"}},
		{"req at 64 bytes", `{"type":"ping","req":"` + strings.Repeat("r", 64) + `"}`, Request{Type: "ping", Req: strings.Repeat("r", 64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeRequest([]byte(tt.in))
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeRequestInvalid(t *testing.T) {
	t.Parallel()
	sub := func(content string) string {
		return `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":` + content + `}`
	}
	tests := []struct {
		name    string
		in      string
		code    task.Code
		req     string // the req the failed Request must still carry
		message string // a substring of the error message
	}{
		{"empty frame", ``, task.CodeInvalid, "", "bad JSON"},
		{"submit with both placements", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","version_of":"` + cid + `","parent_task_id":"` + cid + `"}`, task.CodeInvalid, "r", "at most one"},
		{"submit version_of not a UUID", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","version_of":"nope"}`, task.CodeInvalid, "r", "version_of"},
		{"search not a string", `{"type":"conversations","req":"r","q":5}`, task.CodeInvalid, "r", "q"},
		{"search too long", `{"type":"conversations","req":"r","q":"` + strings.Repeat("a", MaxQueryBytes+1) + `"}`, task.CodeInvalid, "r", "q"},
		{"bad JSON", `{"type":`, task.CodeInvalid, "", "bad JSON"},
		{"trailing junk", `{"type":"ping"} x`, task.CodeInvalid, "", "bad JSON"},
		{"two objects", `{"type":"ping"}{"type":"ping"}`, task.CodeInvalid, "", "bad JSON"},
		{"array", `[{"type":"ping"}]`, task.CodeInvalid, "", "JSON object"},
		{"string", `"ping"`, task.CodeInvalid, "", "JSON object"},
		{"null", `null`, task.CodeInvalid, "", "JSON object"},
		{"number", `42`, task.CodeInvalid, "", "JSON object"},
		{"missing type", `{"req":"a"}`, task.CodeInvalid, "a", "type: required"},
		{"null type", `{"req":"a","type":null}`, task.CodeInvalid, "a", "type: required"},
		{"type not a string", `{"req":"a","type":1}`, task.CodeInvalid, "a", "type: must be a string"},
		{"unknown type", `{"req":"a","type":"submitted"}`, task.CodeInvalid, "a", `unknown type "submitted"`},
		{"type case matters", `{"type":"PING"}`, task.CodeInvalid, "", "unknown type"},
		{"req not a string", `{"type":"ping","req":7}`, task.CodeInvalid, "", "req: must be a string"},
		{"req too long", `{"type":"ping","req":"` + strings.Repeat("r", 65) + `"}`, task.CodeInvalid, "", "req: longer than 64"},
		{"submit missing task_id", `{"type":"submit","req":"r","conversation_id":"` + cid + `","content":"x"}`, task.CodeInvalid, "r", "task_id: required"},
		{"submit missing conversation_id", `{"type":"submit","req":"r","task_id":"` + tid + `","content":"x"}`, task.CodeInvalid, "r", "conversation_id: required"},
		{"submit missing content", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `"}`, task.CodeInvalid, "r", "content: required"},
		{"submit task_id not a string", `{"type":"submit","req":"r","task_id":1,"conversation_id":"` + cid + `","content":"x"}`, task.CodeInvalid, "r", "task_id: must be a string"},
		{"submit task_id malformed", `{"type":"submit","req":"r","task_id":"0190f3c4-5b6a-7c8d-9e0f-11223344556","conversation_id":"` + cid + `","content":"x"}`, task.CodeInvalid, "r", "task_id: not a UUID"},
		{"submit task_id braces", `{"type":"submit","req":"r","task_id":"{` + tid + `}","conversation_id":"` + cid + `","content":"x"}`, task.CodeInvalid, "r", "task_id: not a UUID"},
		{"submit task_id non-hex", `{"type":"submit","req":"r","task_id":"0190f3c4-5b6a-7c8d-9e0f-11223344556g","conversation_id":"` + cid + `","content":"x"}`, task.CodeInvalid, "r", "task_id: not a UUID"},
		{"submit task_id no dashes", `{"type":"submit","req":"r","task_id":"0190f3c45b6a7c8d9e0f112233445566","conversation_id":"` + cid + `","content":"x"}`, task.CodeInvalid, "r", "task_id: not a UUID"},
		{"submit conversation_id malformed", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"abc","content":"x"}`, task.CodeInvalid, "r", "conversation_id: not a UUID"},
		{"submit content empty", sub(`""`), task.CodeInvalid, "r", "content: empty"},
		{"submit content empty, attachments empty", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"","attachments":[]}`, task.CodeInvalid, "r", "content: empty"},
		{"submit files but no content member", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","attachments":["` + cid + `"]}`, task.CodeInvalid, "r", "content: required"},
		{"submit content not a string", sub(`["x"]`), task.CodeInvalid, "r", "content: must be a string"},
		{"submit content too large", sub(`"` + strings.Repeat("a", task.MaxContentBytes+1) + `"`), task.CodeTooLarge, "r", "content: longer than"},
		{"submit content too large multibyte", sub(`"` + strings.Repeat("é", task.MaxContentBytes/2) + `a"`), task.CodeTooLarge, "r", "content: longer than"},
		{"submit content raw invalid UTF-8", sub("\"a\xff\""), task.CodeInvalid, "r", "content: not valid UTF-8"},
		{"submit content lone high surrogate", sub(`"a\ud83d"`), task.CodeInvalid, "r", "content: not valid UTF-8"},
		{"submit content lone low surrogate", sub(`"\ude00a"`), task.CodeInvalid, "r", "content: not valid UTF-8"},
		{"submit content high then escape", sub(`"\ud83d\n"`), task.CodeInvalid, "r", "content: not valid UTF-8"},
		{"submit content two highs", sub(`"\ud83d\ud83d"`), task.CodeInvalid, "r", "content: not valid UTF-8"},
		{"submit content NUL", sub(`"a\u0000b"`), task.CodeInvalid, "r", "U+0000"},
		{"submit attachments not an array", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","attachments":"` + tid + `"}`, task.CodeInvalid, "r", "attachments: must be an array"},
		{"submit attachment not a string", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","attachments":[1]}`, task.CodeInvalid, "r", "attachments: must be an array"},
		{"submit attachment not a UUID", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","attachments":["../x"]}`, task.CodeInvalid, "r", "is not an upload id"},
		{"submit attachment twice", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","attachments":["` + tid + `","` + strings.ToUpper(tid) + `"]}`, task.CodeInvalid, "r", "listed twice"},
		{"submit eleven attachments", `{"type":"submit","req":"r","task_id":"` + tid + `","conversation_id":"` + cid + `","content":"x","attachments":["` + strings.Repeat(tid+`","`, 10) + tid + `"]}`, task.CodeInvalid, "r", "at most 10"},
		{"subscribe missing task_id", `{"type":"subscribe","req":"s"}`, task.CodeInvalid, "s", "task_id: required"},
		{"subscribe null task_id", `{"type":"subscribe","req":"s","task_id":null}`, task.CodeInvalid, "s", "task_id: required"},
		{"unsubscribe bad task_id", `{"type":"unsubscribe","req":"s","task_id":""}`, task.CodeInvalid, "s", "task_id: not a UUID"},
		{"cancel bad task_id", `{"type":"cancel","task_id":true}`, task.CodeInvalid, "", "task_id: must be a string"},
		{"history missing conversation_id", `{"type":"history","req":"h"}`, task.CodeInvalid, "h", "conversation_id: required"},
		{"history before not a string", `{"type":"history","req":"h","conversation_id":"` + cid + `","before":1}`, task.CodeInvalid, "h", "before: must be a string"},
		{"history before too long", `{"type":"history","req":"h","conversation_id":"` + cid + `","before":"` + strings.Repeat("c", MaxCursorBytes+1) + `"}`, task.CodeInvalid, "h", "before: not a cursor"},
		{"history limit 0", `{"type":"history","req":"h","conversation_id":"` + cid + `","limit":0}`, task.CodeInvalid, "h", "limit:"},
		{"history limit 201", `{"type":"history","req":"h","conversation_id":"` + cid + `","limit":201}`, task.CodeInvalid, "h", "limit:"},
		{"history limit negative", `{"type":"history","conversation_id":"` + cid + `","limit":-1}`, task.CodeInvalid, "", "limit:"},
		{"history limit fraction", `{"type":"history","conversation_id":"` + cid + `","limit":1.5}`, task.CodeInvalid, "", "limit:"},
		{"history limit exponent", `{"type":"history","conversation_id":"` + cid + `","limit":1e1}`, task.CodeInvalid, "", "limit:"},
		{"history limit string", `{"type":"history","conversation_id":"` + cid + `","limit":"10"}`, task.CodeInvalid, "", "limit:"},
		{"history limit huge", `{"type":"history","conversation_id":"` + cid + `","limit":99999999999999999999}`, task.CodeInvalid, "", "limit:"},
		{"conversations limit bool", `{"type":"conversations","req":"c","limit":true}`, task.CodeInvalid, "c", "limit:"},
		{"conversations before object", `{"type":"conversations","before":{}}`, task.CodeInvalid, "", "before: must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeRequest([]byte(tt.in))
			var te *task.Error
			if !errors.As(err, &te) {
				t.Fatalf("error %v (%T), want *task.Error", err, err)
			}
			if te.Code != tt.code {
				t.Errorf("code %q, want %q (%s)", te.Code, tt.code, te.Message)
			}
			if !strings.Contains(te.Message, tt.message) {
				t.Errorf("message %q does not contain %q", te.Message, tt.message)
			}
			if got.Req != tt.req {
				t.Errorf("Req %q, want %q", got.Req, tt.req)
			}
		})
	}
}

func TestNormalizeUUID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"00000000-0000-0000-0000-000000000000":  "00000000-0000-0000-0000-000000000000",
		"ABCDEF01-2345-6789-ABCD-EF0123456789":  "abcdef01-2345-6789-abcd-ef0123456789",
		"urn:uuid:abcdef01-2345-6789-abcd-ef01": "",
		"abcdef01-2345-6789-abcd_ef0123456789":  "",
		"abcdef01-2345-6789-abcd-ef012345678":   "",
		"abcdef01-2345-6789-abcd-ef0123456789a": "",
	} {
		got, ok := NormalizeUUID(in)
		if ok != (want != "") || got != want {
			t.Errorf("NormalizeUUID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
