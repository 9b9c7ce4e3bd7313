package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the gateway's Prometheus series. Each Server has its own
// registry so tests can run several gateways in one process.
type metrics struct {
	registry      *prometheus.Registry
	connections   prometheus.Gauge
	sseStreams    prometheus.Gauge
	subscriptions prometheus.Gauge
	upstream      prometheus.Gauge
	fannedOut     prometheus.Counter
	submits       *prometheus.CounterVec
	queueDrops    prometheus.Counter
	gaps          prometheus.Counter
	stale         prometheus.Counter
	resyncs       prometheus.Counter
	logReads      prometheus.Counter
	logReadErrs   prometheus.Counter
	rateLimited   prometheus.Counter
	limitRefusals *prometheus.CounterVec
	unavailable   *prometheus.CounterVec
}

func newMetrics() *metrics {
	r := prometheus.NewRegistry()
	m := &metrics{
		registry: r,
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_gateway_connections",
			Help: "Open WebSocket connections (tabs)."}),
		sseStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_gateway_sse_streams",
			Help: "Open Server-Sent Events streams."}),
		subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_gateway_subscriptions",
			Help: "Task subscriptions of tabs and SSE streams."}),
		upstream: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_gateway_upstream_subscriptions",
			Help: "NATS subscriptions to task subjects (one per followed task)."}),
		fannedOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_events_fanned_out_total",
			Help: "Task events handed to followers."}),
		submits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_gateway_submits_total",
			Help: "Submits by outcome."}, []string{"outcome"}),
		queueDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_queue_drops_total",
			Help: "Connections closed because their outgoing queue was full (1013)."}),
		gaps: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_live_gaps_total",
			Help: "Gaps seen in a live feed, closed from the log."}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_stale_events_total",
			Help: "Live events dropped because a newer attempt of their task had begun (a fenced-out runner woke up)."}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_resyncs_total",
			Help: "Fresh snapshots sent because the log could not close a gap."}),
		logReads: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_log_reads_total",
			Help: "Reads of a task's JetStream log to catch a follower up."}),
		logReadErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_log_read_failures_total",
			Help: "Reads of a task's JetStream log that failed (NATS away, a stream without a leader); they are retried."}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "tether_gateway_rate_limited_total",
			Help: "Requests refused by the per-user rate limit."}),
		limitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_gateway_limit_refusals_total",
			Help: "Requests and connections refused (or subscriptions resynced) by a limit of PROTOCOL.md section 9, by limit."},
			[]string{"limit"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_gateway_unavailable_total",
			Help: "Requests answered unavailable because a dependency was down."}, []string{"operation"}),
	}
	for _, l := range []string{limitTabs, limitConnRate, limitSubscriptions, limitPending, limitRetries, limitFollowBuffer} {
		m.limitRefusals.WithLabelValues(l)
	}
	r.MustRegister(m.connections, m.sseStreams, m.subscriptions, m.upstream, m.fannedOut, m.submits,
		m.queueDrops, m.gaps, m.stale, m.resyncs, m.logReads, m.logReadErrs, m.rateLimited, m.limitRefusals, m.unavailable,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registerer is where the gateway's /metrics series are registered, for the
// parts cmd/gateway runs beside it (the maintenance loop).
func (s *Server) Registerer() prometheus.Registerer { return s.metrics.registry }
