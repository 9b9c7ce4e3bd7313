package protocol

import (
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func BenchmarkEncodeDelta(b *testing.B) {
	e := task.Event{Type: task.EventDelta, TaskID: tid, Seq: 12345, Attempt: 1, Text: "t12345 "}
	for b.Loop() {
		EncodeEvent(e)
	}
}

func BenchmarkDecodeDelta(b *testing.B) {
	for _, text := range []string{"t12345 ", strings.Repeat("long text ", 400)} {
		data := EncodeEvent(task.Event{Type: task.EventDelta, TaskID: tid, Seq: 12345, Attempt: 1, Text: text})
		b.Run(sizeName(len(data)), func(b *testing.B) {
			for b.Loop() {
				if _, err := DecodeEvent(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
