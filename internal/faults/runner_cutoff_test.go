package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRunnerCutOffFromPostgres: each runner reaches Postgres through its own
// pausable proxy. Mid-answer the holder's proxy is paused: it can no longer
// renew its lease, but it still reaches NATS. It must go quiet on its own
// (publish nothing once its lease may have passed to someone else), the
// other runner must continue the answer as attempt 2, and once the proxy
// resumes the cut-off runner must write nothing more: not to the log, not
// to Postgres.
func TestRunnerCutOffFromPostgres(t *testing.T) {
	const lease = 3 * time.Second
	forms(t, single, func(t *testing.T, f form) {
		o := f.opts(lease)
		o.proxied = true
		s := newSystem(t, o)
		n := trials(t, 1)
		for i := 1; i <= n; i++ {
			s.tally.trial()
			t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { cutOffTrial(t, s, lease) })
		}
	})
}

func cutOffTrial(t *testing.T, s *system, lease time.Duration) {
	a := s.submit(t, 3, 400, 10)
	s.holder(t, a.taskID)
	a.waitTokens(t, 100, 30*time.Second)
	victim, held := s.holder(t, a.taskID)
	next := held.Attempt + 1
	from := victim.log.size()
	victim.proxy.pause()
	cutAt := time.Now()
	victim.log.note("faults: Postgres proxy of %s paused", victim.id)
	s.notef(t, "paused the Postgres proxy of %s (holding attempt %d); it still reaches NATS", victim.id, held.Attempt)
	// However the trial ends, the runner gets its database back.
	defer victim.proxy.resume()

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	row, lg := s.verify(t, a, expect{attempt: next, atLeast: true, continued: true})
	if lg == nil {
		return
	}
	// Quiet on its own: in the log, nothing of the cut-off attempt after the
	// next one's first event (a reader would drop it, but the runner must not
	// send it).
	if lg.f.staleDropped > 0 {
		t.Errorf("the cut-off runner kept publishing: %d events of an older attempt in the log after a newer one began: %s",
			lg.f.staleDropped, strings.Join(lg.f.staleSample, ", "))
	}
	if st, ok := lg.f.start(next); ok {
		quiet := lg.f.lastEventAt[held.Attempt].Sub(cutAt)
		s.notef(t, "log: last event of attempt %d %v after the cut, attempt %d began %v after it (lease %v)",
			held.Attempt, quiet.Round(time.Millisecond), next, st.At.Sub(cutAt).Round(time.Millisecond), lease)
		s.tally.time(fmt.Sprintf("cut to the cut-off runner's last event in the log (lease %v)", lease), quiet)
		s.tally.time("cut to the start of the next attempt in the log", st.At.Sub(cutAt))
	}
	for _, l := range victim.log.lines(from, a.taskID) {
		s.notef(t, "%s while cut off: %s", victim.id, l)
	}

	// Give it Postgres back and watch: its held queries (heartbeat,
	// snapshot, finish) now reach the server and must all be fenced out.
	resumeFrom := victim.log.size()
	victim.proxy.resume()
	resumedAt := time.Now()
	_, heldChunks := victim.proxy.stats()
	s.notef(t, "resumed the proxy of %s (%d chunks had been held)", victim.id, heldChunks)

	// Absence of writes can only be observed over a window: two leases (the
	// runner's held calls and its heartbeat period both fit in it), polled,
	// failing at the first change. This is the observation itself, not a
	// synchronisation.
	window := 2 * lease
	deadline := time.Now().Add(window)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	changed := ""
	for changed == "" && time.Now().Before(deadline) {
		<-tick.C
		now, err := s.taskRow(a.taskID)
		if err != nil {
			t.Fatalf("read the task after the resume: %v", err)
		}
		if now.Status != row.Status || now.Attempt != row.Attempt || now.Seq != row.Seq || now.Output != row.Output {
			changed = fmt.Sprintf("Postgres row changed %v after the resume: status %s->%s attempt %d->%d seq %d->%d, %d->%d output bytes",
				time.Since(resumedAt).Round(time.Millisecond), row.Status, now.Status, row.Attempt, now.Attempt, row.Seq, now.Seq, len(row.Output), len(now.Output))
		}
	}
	if changed != "" {
		t.Error(changed)
	}
	after, err := replayLogRetry(s.natsURL, a.taskID)
	switch {
	case err != nil:
		t.Errorf("JetStream log after the resume: %v", err)
	case after.lastPos != lg.lastPos:
		t.Errorf("the cut-off runner wrote to the log after the resume: last stream seq %d, was %d (%d events, was %d; stale %d)",
			after.lastPos, lg.lastPos, after.events, lg.events, after.f.staleDropped)
	}
	for _, tb := range a.tabs {
		tb.view(func(f *follower) {
			if f.staleApplied != 0 || f.afterTerminal != 0 || f.gaps != 0 {
				t.Errorf("%s after the resume: %s", tb.name, f.counters())
			}
			if d := tokenDiff(string(f.out), a.want); d != "" {
				t.Errorf("%s after the resume: %s", tb.name, d)
			}
		})
	}
	for _, l := range victim.log.lines(resumeFrom, a.taskID) {
		s.notef(t, "%s after the resume: %s", victim.id, l)
	}
	s.notef(t, "watched %v after the resume: no write from %s", window, victim.id)
}
