package natsbus_test

import (
	"context"
	"testing"
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
