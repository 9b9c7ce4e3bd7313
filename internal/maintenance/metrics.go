package maintenance

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what a process's maintenance loop did, by action, for its
// /metrics. Every process runs a loop and exactly one of them makes each
// change, so the sum over processes is what was done. A Loop without
// Metrics counts nothing.
type Metrics struct {
	actions *prometheus.CounterVec
}

// The actions counted, the values of the series' action label.
const (
	actionNoRunner     = "no_runner"     // a pending task nobody claimed failed
	actionHandedOn     = "handed_on"     // a lost runner's task went to a new attempt
	actionRunnerLost   = "runner_lost"   // a lost runner's last attempt failed the task
	actionPurged       = "purged"        // finished tasks past the idempotency TTL removed
	actionUploadsSwept = "uploads_swept" // expired uploads removed with their bytes
	actionLogsPurged   = "logs_purged"   // finished tasks' events removed from the log
	actionRedispatched = "redispatched"  // pending tasks dispatched again
)

// NewMetrics registers the loop's series with reg. Every action's series
// exists at zero from the start, so increase() sees its first change.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tether_maintenance_actions_total",
		Help: "Changes made by this process's maintenance loop, by action (no_runner, handed_on, runner_lost, purged, uploads_swept, logs_purged, redispatched)."},
		[]string{"action"})}
	for _, a := range []string{actionNoRunner, actionHandedOn, actionRunnerLost, actionPurged, actionUploadsSwept,
		actionLogsPurged, actionRedispatched} {
		m.actions.WithLabelValues(a)
	}
	if err := reg.Register(m.actions); err != nil {
		return nil, err
	}
	return m, nil
}

// add counts n changes of action; a nil m counts nothing.
func (m *Metrics) add(action string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.actions.WithLabelValues(action).Add(float64(n))
}
