package protocol

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	events := []task.Event{
		{Type: task.EventDelta, TaskID: tid, Seq: 1, Attempt: 1, Text: "t1 "},
		{Type: task.EventDelta, TaskID: tid, Seq: 2, Attempt: 1, Text: ""},
		{Type: task.EventDelta, TaskID: tid, Seq: 3, Attempt: 2, Text: "multi\nline \"quoted\" 😀 <b>"},
		{Type: task.EventProgress, TaskID: tid, Seq: 4, Attempt: 1, Progress: 0},
		{Type: task.EventProgress, TaskID: tid, Seq: 5, Attempt: 1, Progress: 100, Stage: "writing"},
		{Type: task.EventStatus, TaskID: tid, Seq: 6, Status: task.StatusRunning, Attempt: 1},
		{Type: task.EventStatus, TaskID: tid, Seq: 6, Status: task.StatusPending, Attempt: 2, Keep: 420},
		{Type: task.EventStatus, TaskID: tid, Seq: 7, Status: task.StatusFailed, Attempt: 3, Error: ptr("runner_lost")},
		{Type: task.EventStatus, TaskID: tid, Seq: 1 << 40, Status: task.StatusDone, Attempt: 1, ResultRef: ptr("res-1")},
	}
	for _, e := range events {
		got, err := DecodeEvent(EncodeEvent(e))
		if err != nil {
			t.Fatalf("DecodeEvent(%+v): %v", e, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
		}
	}
}

func TestDecodeEventDropsForeignFields(t *testing.T) {
	t.Parallel()
	got, err := DecodeEvent([]byte(`{"type":"delta","task_id":"x","seq":2,"text":"a","progress":5,"status":"done","attempt":2,"extra":1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := task.Event{Type: task.EventDelta, TaskID: "x", Seq: 2, Attempt: 2, Text: "a"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestDecodeEventInvalid(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		``,
		`null`,
		`[]`,
		`{"type":"delta","task_id":"x","seq":1}`,
		`{"type":"delta","task_id":"x","seq":1,"text":"a"}`,
		`{"type":"delta","task_id":"x","seq":1,"attempt":0,"text":"a"}`,
		`{"type":"status","task_id":"x","seq":1,"status":"pending","attempt":2,"keep":-1}`,
		`{"type":"delta","task_id":"x","seq":1,"text":null}`,
		`{"type":"delta","task_id":"","seq":1,"text":"a"}`,
		`{"type":"delta","task_id":"x","seq":0,"text":"a"}`,
		`{"type":"delta","task_id":"x","seq":-1,"text":"a"}`,
		`{"type":"delta","task_id":"x","seq":"1","text":"a"}`,
		`{"type":"delta","task_id":"x","seq":1.5,"text":"a"}`,
		`{"type":"progress","task_id":"x","seq":1}`,
		`{"type":"progress","task_id":"x","seq":1,"progress":101}`,
		`{"type":"progress","task_id":"x","seq":1,"progress":-1}`,
		`{"type":"status","task_id":"x","seq":1,"status":"bogus","attempt":1}`,
		`{"type":"status","task_id":"x","seq":1,"status":"done"}`,
		`{"type":"status","task_id":"x","seq":1,"status":"done","attempt":0}`,
		`{"type":"status","task_id":"x","seq":1,"status":"done","attempt":1,"error":5}`,
		`{"type":"task","task_id":"x","seq":1}`,
		`{"type":"delta","task_id":"x","seq":1,"text":"a"} trailing`,
	} {
		if e, err := DecodeEvent([]byte(in)); !errors.Is(err, ErrBadEvent) {
			t.Errorf("DecodeEvent(%s) = %+v, %v; want ErrBadEvent", in, e, err)
		}
	}
}
