package faults

import (
	"fmt"
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
