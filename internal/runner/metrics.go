package runner

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tether-dev/tether/internal/task"
)

// metrics are the runner's Prometheus series, in a registry of the Runner's
// own (as the gateway's), so tests can run several runners in one process.
// Every label value is created at start: a series that exists at zero from
// the first scrape lets increase() and alerts see its first change
// (docs/grafana/alerts.yml alerts when tasks are submitted but no claim
// succeeds).
type metrics struct {
	registry    *prometheus.Registry
	claims      *prometheus.CounterVec
	running     prometheus.Gauge
	ended       *prometheus.CounterVec
	heartbeats  *prometheus.CounterVec
	leaseLosses *prometheus.CounterVec
}

// Label values of the runner's series.
const (
	claimClaimed      = "claimed"       // the runner holds the task's lease
	claimNotClaimable = "not_claimable" // nobody's to run any more: the dispatch is spent
	claimFailed       = "failed"        // the store failed: the dispatch comes back

	endRestarted = "restarted" // handed on as a new attempt that starts over
	endStopped   = "stopped"   // stopped without finishing: fenced, lapsed, abandoned, or the finish could not be written

	heartbeatOK     = "ok"
	heartbeatFailed = "failed"

	lossFenced = "fenced" // another attempt took the task over
	lossLapsed = "lapsed" // no heartbeat succeeded for a lease past the lease
)

func newMetrics() *metrics {
	r := prometheus.NewRegistry()
	m := &metrics{
		registry: r,
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_runner_claims_total",
			Help: "Claims of dispatched tasks, by outcome (claimed, not_claimable, failed)."}, []string{"outcome"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_runner_attempts_running",
			Help: "Attempts this runner is running."}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_runner_attempts_ended_total",
			Help: "Attempts ended, by outcome (done, failed, cancelled, restarted, stopped without finishing)."}, []string{"outcome"}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_runner_heartbeats_total",
			Help: "Lease heartbeats, by outcome (ok, failed)."}, []string{"outcome"}),
		leaseLosses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_runner_lease_losses_total",
			Help: "Attempts stopped because their lease was lost, by reason (fenced, lapsed)."}, []string{"reason"}),
	}
	for _, o := range []string{claimClaimed, claimNotClaimable, claimFailed} {
		m.claims.WithLabelValues(o)
	}
	for _, o := range []string{string(task.StatusDone), string(task.StatusFailed), string(task.StatusCancelled), endRestarted, endStopped} {
		m.ended.WithLabelValues(o)
	}
	for _, o := range []string{heartbeatOK, heartbeatFailed} {
		m.heartbeats.WithLabelValues(o)
	}
	for _, o := range []string{lossFenced, lossLapsed} {
		m.leaseLosses.WithLabelValues(o)
	}
	r.MustRegister(m.claims, m.running, m.ended, m.heartbeats, m.leaseLosses,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// lost counts a silent stop whose cause is a lost lease.
func (m *metrics) lost(cause error) {
	switch {
	case errors.Is(cause, task.ErrFenced):
		m.leaseLosses.WithLabelValues(lossFenced).Inc()
	case errors.Is(cause, errLeaseLapsed):
		m.leaseLosses.WithLabelValues(lossLapsed).Inc()
	}
}

// Registerer is the runner's registry, for the series of the process's
// other parts (its maintenance loop) to appear on the same /metrics.
func (r *Runner) Registerer() prometheus.Registerer { return r.metrics.registry }

// MetricsHandler serves the runner's Prometheus series; cmd/runner serves
// it at /metrics on TETHER_PPROF_ADDR.
func (r *Runner) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(r.metrics.registry, promhttp.HandlerOpts{})
}
