package faults

import (
	"os"
	"testing"
	"time"
)

// The harness has two subsets. The fast one runs by default, so `make
// test` (go test ./...) runs it: each scenario once, on one form of the
// system. TETHER_FAULTS=all (`make test-faults`) adds the slow scenarios
// (outages that last 15 s, cluster and Postgres restarts) and runs every
// scenario on every form it fits. -short skips the slow ones either way.

// everything reports whether TETHER_FAULTS=all asks for the whole harness.
func everything() bool { return os.Getenv("TETHER_FAULTS") == "all" }

// slowScenario skips t unless the whole harness was asked for.
func slowScenario(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s", what)
	}
	if !everything() {
		t.Skipf("%s: run with TETHER_FAULTS=all (make test-faults)", what)
	}
}

// form is one shape of the system a scenario runs against.
type form struct {
	name string
	opts func(lease time.Duration) sysOptions
}

var (
	// single is one nats-server (nats.conf without its cluster block), two
	// gateways and two runners; tabs spread over the gateways by the harness.
	single = form{name: "single", opts: func(lease time.Duration) sysOptions {
		return sysOptions{gateways: 2, runners: 2, natsNodes: 1, lease: lease}
	}}
	// cluster is the form of docs/deploy.md: the three-node NATS cluster of
	// nats.conf with streams of three replicas, two gateways behind the
	// round-robin balancer, two runners.
	cluster = form{name: "cluster", opts: func(lease time.Duration) sysOptions {
		return sysOptions{gateways: 2, runners: 2, natsNodes: 3, balanced: true, lease: lease}
	}}
)

// forms runs fn as a subtest per form: only on fast in the fast subset, on
// single and cluster with TETHER_FAULTS=all.
func forms(t *testing.T, fast form, fn func(t *testing.T, f form)) {
	t.Helper()
	run := []form{fast}
	if everything() {
		run = []form{single, cluster}
	}
	for _, f := range run {
		t.Run(f.name, func(t *testing.T) { fn(t, f) })
	}
}
