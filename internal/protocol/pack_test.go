package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func packOf(attempt int, first int64, texts ...string) []task.Event {
	var events []task.Event
	for i, text := range texts {
		events = append(events, task.Event{Type: task.EventDelta, TaskID: tid, Seq: first + int64(i), Attempt: attempt, Text: text})
	}
	return events
}

// A pack is its deltas' wire JSON joined by newlines, the frame a gateway
// coalesces, and every reader gets the deltas back one by one with the
// bytes a client gets for each.
func TestPackRoundTrip(t *testing.T) {
	t.Parallel()
	for _, events := range [][]task.Event{
		packOf(1, 7, "one"),
		packOf(2, 41, "multi\nline ", `"quoted" \ `, "😀 <b>", "", "\u2028"),
	} {
		data := EncodePack(events)
		var lines [][]byte
		for _, e := range events {
			lines = append(lines, EncodeEvent(e))
		}
		if want := bytes.Join(lines, []byte("\n")); !bytes.Equal(data, want) {
			t.Fatalf("pack:\n got %s\nwant %s", data, want)
		}
		got, err := DecodeMessage(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, events) {
			t.Fatalf("DecodeMessage:\n got %+v\nwant %+v", got, events)
		}
		i := 0
		err = PeekMessage(data, func(e task.Event, piece []byte) {
			want := events[i]
			if e.Type != want.Type || e.Seq != want.Seq || e.Attempt != want.Attempt || !bytes.Equal(piece, lines[i]) {
				t.Errorf("PeekMessage piece %d: %+v %s, want %+v %s", i, e, piece, want, lines[i])
			}
			i++
		})
		if err != nil || i != len(events) {
			t.Fatalf("PeekMessage: %d pieces, %v", i, err)
		}
	}
}

// A single event is a message of its own, whatever its type: the log of a
// runner from before packs reads the same.
func TestSingleEventMessages(t *testing.T) {
	t.Parallel()
	for _, e := range []task.Event{
		packOf(1, 1, "x")[0],
		{Type: task.EventStatus, TaskID: tid, Seq: 3, Status: task.StatusRunning, Attempt: 2, Keep: 5},
		{Type: task.EventProgress, TaskID: tid, Seq: 4, Attempt: 1, Progress: 50},
	} {
		data := EncodePack([]task.Event{e})
		if !bytes.Equal(data, EncodeEvent(e)) {
			t.Fatalf("single %s: %s", e.Type, data)
		}
		got, err := DecodeMessage(data)
		if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], e) {
			t.Fatalf("DecodeMessage(%s) = %+v, %v", data, got, err)
		}
	}
}

// A pack holds consecutive deltas of one task and attempt, and nothing
// else: a message that breaks that is refused, not half read.
func TestBadPacks(t *testing.T) {
	t.Parallel()
	status := EncodeEvent(task.Event{Type: task.EventStatus, TaskID: tid, Seq: 3, Status: task.StatusDone, Attempt: 1})
	d := func(attempt int, seq int64) []byte { return EncodeEvent(packOf(attempt, seq, "a")[0]) }
	other := EncodeEvent(task.Event{Type: task.EventDelta, TaskID: "another", Seq: 2, Attempt: 1, Text: "a"})
	for name, data := range map[string][]byte{
		"a gap":            bytes.Join([][]byte{d(1, 1), d(1, 3)}, []byte("\n")),
		"a repeat":         bytes.Join([][]byte{d(1, 1), d(1, 1)}, []byte("\n")),
		"two attempts":     bytes.Join([][]byte{d(1, 1), d(2, 2)}, []byte("\n")),
		"a status":         bytes.Join([][]byte{d(1, 2), status}, []byte("\n")),
		"another task":     bytes.Join([][]byte{d(1, 1), other}, []byte("\n")),
		"an empty line":    bytes.Join([][]byte{d(1, 1), nil, d(1, 2)}, []byte("\n")),
		"a trailing break": append(d(1, 1), '\n'),
	} {
		if _, err := DecodeMessage(data); !errors.Is(err, ErrBadEvent) {
			t.Errorf("DecodeMessage of %s: %v, want ErrBadEvent", name, err)
		}
		if name == "another task" {
			continue // PeekMessage does not read the task id: the subject says it
		}
		err := PeekMessage(data, func(task.Event, []byte) { t.Errorf("PeekMessage of %s handed on an event", name) })
		if !errors.Is(err, ErrBadEvent) {
			t.Errorf("PeekMessage of %s: %v, want ErrBadEvent", name, err)
		}
	}
}

func TestEncodePackRefusesWhatIsNotAPack(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("EncodePack of a gap did not panic")
		}
	}()
	EncodePack(append(packOf(1, 1, "a"), packOf(1, 3, "b")...))
}
