package protocol

import (
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func BenchmarkEncodeDelta(b *testing.B) {
	e := task.Event{Type: task.EventDelta, TaskID: tid, Seq: 12345, Text: "t12345 "}
	for b.Loop() {
		EncodeEvent(e)
	}
}

func BenchmarkDecodeDelta(b *testing.B) {
	data := EncodeEvent(task.Event{Type: task.EventDelta, TaskID: tid, Seq: 12345, Text: "t12345 "})
	for b.Loop() {
		if _, err := DecodeEvent(data); err != nil {
			b.Fatal(err)
		}
	}
}
