package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// latency: many tabs following one stream at a steady rate; each event
// carries the time it was published, so every tab measures each delivery.
func (b *bench) latency(ctx context.Context) error {
	s, err := b.start(ctx, "latency", parts{raw: true})
	if err != nil {
		return err
	}
	defer s.stop()
	t, r, err := b.sides(ctx, s, b.o.tabs, "bench-latency")
	if err != nil {
		return err
	}
	defer t.aud.close()
	defer r.aud.close()
	secs := b.o.duration.Seconds()
	for rep := range b.o.repeats {
		for _, load := range b.o.loads {
			events := max(int64(float64(load)*secs), 5)
			for _, sd := range []*side{t, r} {
				prof := ""
				if rep == 0 && sd.name == "tether" && b.o.profiles != "" {
					prof = filepath.Join(b.o.profiles, fmt.Sprintf("latency-%d-gateway.pprof", load))
				}
				sd.aud.record(true)
				cpu := meter(sd.pid)
				frames0 := sd.aud.frameCount()
				stopProf := startProfile(sd.pprof, prof, int(secs+0.999))
				to := sd.seq + events
				if err := stream(ctx, s.bus, sd.task, sd.seq, to, load); err != nil {
					return err
				}
				if err := sd.aud.waitFor(ctx, to, time.Minute); err != nil {
					return fmt.Errorf("%s at %d/s: %w", sd.name, load, err)
				}
				used := cpu.used()
				lat := sd.aud.record(false)
				stopProf()
				sd.seq = to
				deliveries := float64(events) * float64(len(sd.aud.ws)-sd.aud.dropped())
				lr := latencyRun{Load: load, P50: ms(percentile(lat, 50)), P99: ms(percentile(lat, 99)),
					CPUPerDelivery: us(used) / deliveries,
					PerFrame:       deliveries / float64(max(sd.aud.frameCount()-frames0, 1))}
				b.logf("   %-6s %4d events/s to %d tabs: p50 %.1f ms, p99 %.1f ms, %.2f µs CPU a delivery, %.1f events a frame",
					sd.name, load, len(sd.aud.ws), lr.P50, lr.P99, lr.CPUPerDelivery, lr.PerFrame)
				if sd.name == "tether" {
					b.res.Latency.Tether = append(b.res.Latency.Tether, lr)
				} else {
					b.res.Latency.Raw = append(b.res.Latency.Raw, lr)
				}
			}
		}
	}
	return nil
}
