package main

import (
	"slices"
	"time"
)

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile p (0..100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuMeter measures a process's CPU over an interval.
type cpuMeter struct {
	pid   int
	start time.Duration
}

func meter(pid int) cpuMeter {
	c, _ := cpuTime(pid)
	return cpuMeter{pid: pid, start: c}
}

func (m cpuMeter) used() time.Duration {
	c, _ := cpuTime(m.pid)
	return c - m.start
}
