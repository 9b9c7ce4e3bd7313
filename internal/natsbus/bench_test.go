package natsbus_test

import (
	"context"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

// BenchmarkPublisher measures a runner's event rate: asynchronous publishes
// with checked acks, flushed every 256 events as a snapshot batch would be.
func BenchmarkPublisher(b *testing.B) {
	bus, _ := setup(b)
	p := bus.NewPublisher()
	ctx := context.Background()
	seq := int64(0)
	b.ResetTimer()
	for b.Loop() {
		seq++
		if err := p.Publish(delta(taskA, seq)); err != nil {
			b.Fatal(err)
		}
		if seq%256 == 0 {
			if _, err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReadLog measures a catch-up's look in the log of a task with
// 1,000 events: from the stream position of its last delivered event (a
// tab that missed a few: the last 5), and the whole log (a resume from the
// start).
func BenchmarkReadLog(b *testing.B) {
	bus, _ := setup(b)
	ctx := context.Background()
	p := bus.NewPublisher()
	for seq := int64(1); seq <= 1000; seq++ {
		if err := p.Publish(delta(taskA, seq)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	for _, bb := range []struct {
		name  string
		after int64
		from  uint64
		want  int
	}{
		{"last-5", 995, 995, 5},
		{"all-1000", 0, 0, 1000},
	} {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				got, err := bus.ReadLog(ctx, taskA, task.Position{Attempt: 1, Seq: bb.after}, bb.from)
				if err != nil || len(got) != bb.want {
					b.Fatalf("read %d events, %v; want %d", len(got), err, bb.want)
				}
			}
		})
	}
}
