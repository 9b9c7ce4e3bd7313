package faults

import (
	"fmt"
	"testing"
	"time"
)

// outage is how long NATS stays down in TestNATSOutage: longer than the
// 10-12 s that made a runner before 1.1 abandon its attempt.
const outage = 15 * time.Second

// TestNATSOutage: one runner, /stream 600 25; mid-answer the nats-server is
// SIGKILLed, stays down for 15 s and comes back on the same port and store.
// The answer must ride through on attempt 1 (no attempt 2 in Postgres, in
// the log or on any tab) and end exact everywhere; the gateway stays up and
// its tabs stay connected or resubscribe.
func TestNATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the NATS outage scenario takes about 30 s")
	}
	// A lease well under the outage: the runner must keep it in Postgres
	// throughout, so any attempt 2 would show.
	s := newSystem(t, sysOptions{gateways: 1, runners: 1, lease: 5 * time.Second})
	n := trials(t, 1)
	for i := 1; i <= n; i++ {
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { natsOutageTrial(t, s) })
	}
}

func natsOutageTrial(t *testing.T, s *system) {
	a := s.submit(t, 3, 600, 25)
	s.holder(t, a.taskID)
	a.waitTokens(t, 150, 30*time.Second)

	killAt := time.Now()
	if err := s.nats.kill(); err != nil {
		t.Fatal(err)
	}
	s.notef(t, "SIGKILLed nats-server at about 150 tokens; down for %v", outage)
	// The outage is the scenario itself: NATS stays down this long whatever
	// the processes do. A timer, not a synchronisation.
	down := time.NewTimer(outage)
	<-down.C
	if err := s.restartNATS(); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	s.notef(t, "nats-server back on the same port and store after %v", upAt.Sub(killAt).Round(time.Millisecond))

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	s.verify(t, a, expect{attempt: 1})
	reportPauses(t, s, a, killAt, upAt, "NATS killed", "NATS back")
}
