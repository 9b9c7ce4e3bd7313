package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tether-dev/tether/internal/maintenance"
)

// actions reads tether_maintenance_actions_total by action from reg.
func actions(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "tether_maintenance_actions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// TestMetricsCountActions: every action's series is there at zero before
// the first round, and a round counts the changes it made: a task nobody
// claimed failed (no_runner), another dispatched again.
func TestMetricsCountActions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reg := prometheus.NewRegistry()
	m, err := maintenance.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e.loop.Metrics = m
	before := actions(t, reg)
	for _, a := range []string{"no_runner", "handed_on", "runner_lost", "purged", "uploads_swept", "logs_purged", "redispatched"} {
		if v, ok := before[a]; !ok || v != 0 {
			t.Errorf("before a round: %s = %v, exposed %v; want 0", a, v, ok)
		}
	}

	e.submit(t, "never claimed")
	e.clock.Advance(55 * time.Second)
	e.submit(t, "its dispatch lost")
	e.clock.Advance(6 * time.Second) // the first is past the 1m pending timeout, the second 6s old
	e.loop.Tick(context.Background())
	got := actions(t, reg)
	if got["no_runner"] != 1 || got["redispatched"] != 1 || got["handed_on"] != 0 || got["runner_lost"] != 0 {
		t.Fatalf("after a round: %v; want no_runner 1, redispatched 1", got)
	}
}
