package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func peekCases() []task.Event {
	errText, ref := "demo failure", "0190f3c4-5b6a-7c8d-9e0f-000000000001"
	return []task.Event{
		{Type: task.EventDelta, TaskID: tid, Seq: 1, Attempt: 1, Text: "t1 "},
		{Type: task.EventDelta, TaskID: tid, Seq: 7, Attempt: 3, Text: `"seq":99,"attempt":9 \" \\ <&> ` + "\u2028\n\x00\xff"},
		{Type: task.EventProgress, TaskID: tid, Seq: 2, Attempt: 1, Progress: 40, Stage: "thinking"},
		{Type: task.EventStatus, TaskID: tid, Seq: 3, Attempt: 2, Status: task.StatusRunning, Keep: 12},
		{Type: task.EventStatus, TaskID: tid, Seq: 4, Attempt: 2, Status: task.StatusPending},
		{Type: task.EventStatus, TaskID: tid, Seq: 9, Attempt: 2, Status: task.StatusFailed, Error: &errText},
		{Type: task.EventStatus, TaskID: tid, Seq: 10, Attempt: 1, Status: task.StatusDone, ResultRef: &ref},
	}
}

// PeekEvent reads exactly what DecodeEvent reads of the fields a forwarder
// needs, from any event EncodeEvent makes.
func TestPeekEventAgreesWithDecode(t *testing.T) {
	for _, e := range peekCases() {
		data := EncodeEvent(e)
		full, err := DecodeEvent(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := PeekEvent(data)
		if err != nil {
			t.Fatalf("peek %s: %v", data, err)
		}
		if got.Type != full.Type || got.Seq != full.Seq || got.Attempt != full.Attempt || got.Status != full.Status ||
			got.StartsAttempt() != full.StartsAttempt() || got.Terminal() != full.Terminal() {
			t.Fatalf("peek %s = %+v, decode %+v", data, got, full)
		}
	}
	for _, bad := range []string{``, `{}`, `[]`, `{"type":"delta","seq":1}`, `{"type":"delta","attempt":1}`,
		`{"type":"delta","seq":0,"attempt":1}`, `{"type":"other","seq":1,"attempt":1}`,
		`{"type":"status","seq":1,"attempt":1}`, `{"type":"status","seq":1,"attempt":1,"status":"odd"}`,
		`{"type":"delta","task_id":"x","seq":1,"attempt":1`} {
		if _, err := PeekEvent([]byte(bad)); err == nil {
			t.Errorf("peek accepted %s", bad)
		}
	}
}

// The hand-made encoding of deltas and progress events is byte for byte
// what encoding/json makes of their wire structs.
func TestEncodeEventIsEncodingJSON(t *testing.T) {
	texts := []string{"", "t1 ", "é日本\U0001F600", "<a href=\"x\">&amp;</a>", "\x00\x01\b\f\n\r\t\x1f\x7f",
		"\u2028\u2029", "\xff\xfe bad \xc3", `\"\\`, strings.Repeat("long ", 1000)}
	for _, text := range texts {
		checkEncoding(t, task.Event{Type: task.EventDelta, TaskID: tid, Seq: 123456789, Attempt: 7, Text: text})
		checkEncoding(t, task.Event{Type: task.EventProgress, TaskID: tid, Seq: 5, Attempt: 1, Progress: 99, Stage: text})
	}
}

func checkEncoding(t *testing.T, e task.Event) {
	t.Helper()
	var want []byte
	var err error
	if e.Type == task.EventDelta {
		want, err = json.Marshal(deltaWire{e.Type, e.TaskID, e.Seq, e.Attempt, e.Text})
	} else {
		want, err = json.Marshal(progressWire{e.Type, e.TaskID, e.Seq, e.Attempt, e.Progress, e.Stage})
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := EncodeEvent(e); string(got) != string(want) {
		t.Fatalf("encoded\n%s\nencoding/json\n%s", got, want)
	}
}

func FuzzEncodeAndPeek(f *testing.F) {
	f.Add("t1 ", int64(1), 1, 0)
	f.Add("<\u2028\xff\"\\", int64(99), 3, 100)
	f.Fuzz(func(t *testing.T, text string, seq int64, attempt, progress int) {
		if seq < 1 || attempt < 1 || attempt > 1<<30 || progress < 0 || progress > 100 {
			return
		}
		for _, e := range []task.Event{
			{Type: task.EventDelta, TaskID: tid, Seq: seq, Attempt: attempt, Text: text},
			{Type: task.EventProgress, TaskID: tid, Seq: seq, Attempt: attempt, Progress: progress, Stage: text},
		} {
			checkEncoding(t, e)
			got, err := PeekEvent(EncodeEvent(e))
			if err != nil || got.Type != e.Type || got.Seq != e.Seq || got.Attempt != e.Attempt {
				t.Fatalf("peek %+v: %+v %v", e, got, err)
			}
		}
	})
}

// BenchmarkPeekDelta is the gateway's per-event read of a forwarded delta;
// compare BenchmarkDecodeDelta, the full decode it replaced (and a delta
// of 4 KiB costs PeekEvent no more than one of 7 bytes).
func BenchmarkPeekDelta(b *testing.B) {
	for _, text := range []string{"t12345 ", strings.Repeat("long text ", 400)} {
		data := EncodeEvent(task.Event{Type: task.EventDelta, TaskID: tid, Seq: 12345, Attempt: 1, Text: text})
		b.Run(sizeName(len(data)), func(b *testing.B) {
			for b.Loop() {
				if _, err := PeekEvent(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func sizeName(n int) string {
	if n < 1024 {
		return "small"
	}
	return "4KiB"
}
