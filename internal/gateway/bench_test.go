package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/engine/enginetest"
)

// BenchmarkSubmitToFirstDelta: a submit over WebSocket until the first
// delta of its answer reaches the tab, through Postgres, the dispatch queue,
// a runner claim and the NATS fan-out.
func BenchmarkSubmitToFirstDelta(b *testing.B) {
	e := setup(b)
	tb := e.dial("bench")
	conv := newID()
	var total time.Duration
	for b.Loop() {
		id := newID()
		start := time.Now()
		tb.send(map[string]any{"type": "submit", "task_id": id, "conversation_id": conv, "content": "/stream 1 0"})
		tb.until(func(f frame) bool { return f.Type == "delta" && f.TaskID == id })
		total += time.Since(start)
		tb.until(func(f frame) bool { return f.Type == "status" && f.TaskID == id && isTerminal(f.Status) })
		tb.call(map[string]any{"type": "unsubscribe", "task_id": id})
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/first-delta")
}

// BenchmarkReconnectToSnapshot: a new tab connects and subscribes to a
// running task until its snapshot arrives (the F5 path).
func BenchmarkReconnectToSnapshot(b *testing.B) {
	e := setup(b)
	id, conv := newID(), newID()
	e.dial("bench").submit(id, conv, "/stream 100000 100")
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		tb := e.dial("bench")
		r := tb.call(map[string]any{"type": "subscribe", "task_id": id})
		if r.Type != "snapshot" {
			b.Fatal(r.raw)
		}
		total += time.Since(start)
		_ = tb.c.CloseNow()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/snapshot")
}

// BenchmarkFanOut: one fast stream followed by many tabs; reports events
// delivered to tabs per second.
func BenchmarkFanOut(b *testing.B) {
	for _, tabs := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("tabs=%d", tabs), func(b *testing.B) {
			e := setup(b)
			conv := newID()
			ts := make([]*tab, tabs)
			for i := range ts {
				ts[i] = e.dial("bench")
			}
			var events int
			var elapsed time.Duration
			for b.Loop() {
				id := newID()
				ts[0].submit(id, conv, "/stream 2000 0")
				start := time.Now()
				for _, tb := range ts[1:] {
					tb.send(map[string]any{"type": "subscribe", "task_id": id, "req": "s"})
				}
				for _, tb := range ts {
					f := &follower{taskID: id}
					for !f.apply(tb.next()) {
						events++
					}
					if f.output() != enginetest.StreamText(2000) {
						b.Fatalf("tab got %d bytes", len(f.output()))
					}
					tb.send(map[string]any{"type": "unsubscribe", "task_id": id})
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(events)/elapsed.Seconds(), "deliveries/s")
		})
	}
}
