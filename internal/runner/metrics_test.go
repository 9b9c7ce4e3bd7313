package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/task"
)

// scrape reads the runner's /metrics as Prometheus would.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is the value of the series of family name with label=value (a
// family without labels: label ""), and whether it is exposed.
func value(fams map[string]*dto.MetricFamily, name, label, want string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		ok := label == ""
		for _, l := range m.GetLabel() {
			ok = ok || (l.GetName() == label && l.GetValue() == want)
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestMetricsCountClaimsAttemptsAndHeartbeats: every series is exposed at
// zero before any work (so an alert's increase() sees the first claim), and
// a task run to its end counts one claim, one attempt done, heartbeats, and
// a dispatch of a finished task counts as not claimable.
func TestMetricsCountClaimsAttemptsAndHeartbeats(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r, err := runner.New(runner.Config{ID: "r1", Lease: testLease}, e.store, natsrunner.New(e.bus))
	if err != nil {
		t.Fatalf("runner.New: %v", err)
	}
	h := r.MetricsHandler()
	before := scrape(t, h)
	for _, s := range []struct{ name, label, value string }{
		{"tether_runner_claims_total", "outcome", "claimed"},
		{"tether_runner_claims_total", "outcome", "not_claimable"},
		{"tether_runner_claims_total", "outcome", "failed"},
		{"tether_runner_attempts_running", "", ""},
		{"tether_runner_attempts_ended_total", "outcome", "done"},
		{"tether_runner_attempts_ended_total", "outcome", "stopped"},
		{"tether_runner_heartbeats_total", "outcome", "ok"},
		{"tether_runner_heartbeats_total", "outcome", "failed"},
		{"tether_runner_lease_losses_total", "reason", "fenced"},
		{"tether_runner_lease_losses_total", "reason", "lapsed"},
	} {
		if v, ok := value(before, s.name, s.label, s.value); !ok || v != 0 {
			t.Errorf("before any work: %s{%s=%q} = %v, exposed %v; want 0, exposed", s.name, s.label, s.value, v, ok)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Long enough for a heartbeat (every lease/3, 500 ms) to be sent.
	tk := e.submit("/stream 8 100")
	eventually.True(t, "an attempt running", func() bool {
		v, _ := value(scrape(t, h), "tether_runner_attempts_running", "", "")
		return v == 1
	})
	e.waitStatus(tk.ID, task.StatusDone)
	eventually.True(t, "the attempt counted as done and no longer running", func() bool {
		f := scrape(t, h)
		ended, _ := value(f, "tether_runner_attempts_ended_total", "outcome", "done")
		running, _ := value(f, "tether_runner_attempts_running", "", "")
		return ended == 1 && running == 0
	})
	f := scrape(t, h)
	if v, _ := value(f, "tether_runner_claims_total", "outcome", "claimed"); v != 1 {
		t.Errorf("claims claimed = %v, want 1", v)
	}
	if v, _ := value(f, "tether_runner_heartbeats_total", "outcome", "ok"); v < 1 {
		t.Errorf("heartbeats ok = %v, want at least 1 in an 800 ms attempt with a 500 ms heartbeat", v)
	}
	if v, _ := value(f, "tether_runner_lease_losses_total", "reason", "fenced"); v != 0 {
		t.Errorf("lease losses fenced = %v, want 0", v)
	}

	// The same dispatch again: the task is done, nobody's to run.
	if err := e.bus.Dispatch(context.Background(), tk.ID, tk.Attempt+1); err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	eventually.True(t, "a dispatch of a finished task counted as not claimable", func() bool {
		v, _ := value(scrape(t, h), "tether_runner_claims_total", "outcome", "not_claimable")
		return v == 1
	})
}
