package faults

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestGatewayRestartEmbeddedNATS: the `make run` form, a gateway embedding
// NATS (fixed port, JetStream under the test's directory) and one runner
// connected to it. Mid-answer the gateway is SIGKILLed, taking NATS with it,
// and started again with the same settings; the tabs reconnect with backoff
// and resubscribe. The answer must stay on attempt 1 and end exact.
func TestGatewayRestartEmbeddedNATS(t *testing.T) {
	// A lease well under the outage: the runner must keep it in Postgres
	// throughout, so any attempt 2 would show.
	s := newSystem(t, sysOptions{embedded: true, runners: 1, lease: 5 * time.Second})
	n := trials(t, 1)
	for i := 1; i <= n; i++ {
		s.tally.trial()
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { gatewayRestartTrial(t, s) })
	}
}

func gatewayRestartTrial(t *testing.T, s *system) {
	a := s.submit(t, 3, 400, 25)
	s.holder(t, a.taskID)
	a.waitTokens(t, 100, 30*time.Second)

	g := s.gateways[0]
	killAt := time.Now()
	if err := g.kill(); err != nil {
		t.Fatal(err)
	}
	s.notef(t, "SIGKILLed %s (with its embedded NATS) at about 100 tokens", g.name)
	if down := gatewayDown(t); down > 0 {
		// The outage itself (a deploy that takes this long), not a wait
		// for anything.
		s.notef(t, "keeping %s down for %v", g.name, down)
		time.Sleep(down)
	}
	if err := s.startGateway(g); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	s.notef(t, "%s ready again on the same port, NATS port and data dir after %v", g.name, upAt.Sub(killAt).Round(time.Millisecond))

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	s.verify(t, a, expect{attempt: 1})
	reportPauses(t, s, a, killAt, upAt, "the kill", "ready")
}

// gatewayDown is how long the gateway stays down before it is started again:
// TETHER_FAULT_GATEWAY_DOWN (a Go duration), 0 by default (a restart).
func gatewayDown(t *testing.T) time.Duration {
	v := os.Getenv("TETHER_FAULT_GATEWAY_DOWN")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("TETHER_FAULT_GATEWAY_DOWN=%q is not a duration", v)
	}
	return d
}
