package faults

import (
	"fmt"
	"testing"
	"time"
)

// TestRunnerKilled: three tabs (on two gateways) follow /stream 400 10; at
// about 100 tokens the runner holding the task is SIGKILLed. The other
// runner must take over after the lease as a new attempt and continue the
// answer: keep > 0, nothing regenerated, the exact text everywhere.
func TestRunnerKilled(t *testing.T) {
	const lease = 3 * time.Second
	forms(t, cluster, func(t *testing.T, f form) {
		s := newSystem(t, f.opts(lease))
		n := trials(t, 1)
		for i := 1; i <= n; i++ {
			s.tally.trial()
			t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { runnerKilledTrial(t, s, lease) })
			if i < n {
				// The next trial starts with two runners again: a replacement
				// with a new id, as a restarted pod would have.
				s.startRunner(t, s.newRunner())
			}
		}
	})
}

func runnerKilledTrial(t *testing.T, s *system, lease time.Duration) {
	a := s.submit(t, 3, 400, 10)
	s.holder(t, a.taskID)
	a.waitTokens(t, 100, 30*time.Second)

	victim, row := s.holder(t, a.taskID)
	var had int
	a.tabs[0].view(func(f *follower) { had = len(f.out) })
	pid := victim.pid()
	killAt := time.Now()
	if err := victim.kill(); err != nil {
		t.Fatal(err)
	}
	tok, _ := tokensIn(a.want, had)
	next := row.Attempt + 1
	s.notef(t, "SIGKILLed %s (pid %d) holding attempt %d at about %d tokens", victim.id, pid, row.Attempt, tok)

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	_, lg := s.verify(t, a, expect{attempt: next, atLeast: true, continued: true, noRegenerate: true})
	if lg != nil {
		if st, ok := lg.f.start(next); ok {
			keepTokens, _ := tokensIn(a.want, st.Keep)
			s.notef(t, "log: attempt %d keeps %d bytes (%d tokens) of the %d the log held; it began %v after the kill",
				next, st.Keep, keepTokens, st.Had, st.At.Sub(killAt).Round(time.Millisecond))
		}
	}
	for _, tb := range a.tabs {
		tb.view(func(f *follower) {
			if at, ok := f.firstDeltaAt[next]; ok {
				s.notef(t, "takeover on %s: kill -> first delta of attempt %d: %v (lease %v, maintenance every %v)",
					tb.name, next, at.Sub(killAt).Round(time.Millisecond), lease, maintenanceEvery)
				s.tally.time(fmt.Sprintf("takeover, kill to the first delta of the next attempt on each tab (lease %v)", lease), at.Sub(killAt))
			}
		})
	}
}
