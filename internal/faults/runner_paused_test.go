package faults

import (
	"fmt"
	"testing"
	"time"
)

// TestRunnerPausedBurst: /stream 20000 0, as fast as the runner goes. The
// runner holding the task is SIGSTOPped mid-stream, the other runner takes
// over as attempt 2, and the paused one is SIGCONTed at once: whatever it
// had in its buffers then reaches NATS as attempt 1, after attempt 2 began.
// No reader may apply any of it; every tab, the log and Postgres end exact.
func TestRunnerPausedBurst(t *testing.T) {
	// The fast subset runs it on the cluster: a trial on one node writing
	// every message to disk on its own (sync_interval: always) takes about
	// twice as long here (7-8 s against 4-5 s, docs/RELIABILITY.md).
	runnerPaused(t, cluster, pausedCase{n: 20000, ms: 0, atSeq: 2000})
}

// TestRunnerPausedPaced is the same with /stream 300 10: the stale runner
// wakes up in the middle of a paced answer.
func TestRunnerPausedPaced(t *testing.T) {
	runnerPaused(t, single, pausedCase{n: 300, ms: 10, atSeq: 100})
}

type pausedCase struct {
	n, ms int
	// atSeq: pause once the live feed (core NATS, right behind the runner)
	// reaches this seq.
	atSeq int64
}

func runnerPaused(t *testing.T, fast form, c pausedCase) {
	const lease = 3 * time.Second
	forms(t, fast, func(t *testing.T, f form) {
		s := newSystem(t, f.opts(lease))
		n := trials(t, 3)
		var summary []string
		for i := 1; i <= n; i++ {
			var line string
			s.tally.trial()
			ok := t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { line = pausedTrial(t, s, c, lease) })
			summary = append(summary, fmt.Sprintf("trial %d (%s): %s", i, passFail(ok), line))
		}
		for _, l := range summary {
			s.notef(t, "%s", l)
		}
	})
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// pausedTrial runs one answer through a pause and returns its counts.
func pausedTrial(t *testing.T, s *system, c pausedCase, lease time.Duration) string {
	atSeq := c.atSeq
	for try := 1; ; try++ {
		a := newAnswer(c.n, c.ms)
		live := watchLive(t, s.natsURL, a.taskID)
		s.open(t, a, 3)
		if err := live.waitSeq(atSeq, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		victim, held := s.holderOrEnd(t, a.taskID)
		if victim != nil {
			if err := victim.pause(); err != nil {
				t.Fatal(err)
			}
		}
		pausedAt := time.Now()
		pausedSeq := live.seq()
		if row, err := s.taskRow(a.taskID); victim == nil || (err == nil && isTerminal(row.Status)) {
			// The answer ended before the signal landed: no fault was
			// injected. Resume and try again, pausing earlier.
			if victim != nil {
				_ = victim.resume()
			}
			s.notef(t, "try %d: the answer was over (%s) before SIGSTOP at live seq %d; trying again earlier", try, row.Status, pausedSeq)
			if try == 3 {
				t.Fatalf("could not pause the runner mid-stream in %d tries", try)
			}
			a.waitDone(t, 30*time.Second)
			atSeq = max(10, atSeq/4)
			continue
		}
		s.notef(t, "SIGSTOPped %s holding attempt %d at live seq %d", victim.id, held.Attempt, pausedSeq)

		next := held.Attempt + 1
		row, err := s.waitRow(a.taskID, 10*lease+30*time.Second, fmt.Sprintf("attempt %d taken over by another runner", next), func(r pgTask) bool {
			return r.Attempt >= next && r.RunnerID != victim.id && (r.Status == "running" || isTerminal(r.Status))
		})
		if err != nil {
			_ = victim.resume()
			t.Fatal(err)
		}
		takenAt := time.Now()
		if err := victim.resume(); err != nil {
			t.Fatal(err)
		}
		s.notef(t, "attempt %d %s by %q %v after the pause; SIGCONTed %s at once",
			row.Attempt, row.Status, row.RunnerID, takenAt.Sub(pausedAt).Round(time.Millisecond), victim.id)
		s.tally.time(fmt.Sprintf("takeover, SIGSTOP to the next attempt running in Postgres (lease %v)", lease), takenAt.Sub(pausedAt))

		if !a.waitDone(t, 120*time.Second) {
			s.probe(t, a)
		}
		_, lg := s.verify(t, a, expect{attempt: next, atLeast: true, continued: true})

		var tabStale, tabRegen []int
		for _, tb := range a.tabs {
			tb.view(func(f *follower) {
				tabStale = append(tabStale, f.staleDropped)
				if st, ok := f.start(next); ok {
					tabRegen = append(tabRegen, st.Had-st.Keep)
				}
			})
		}
		line := fmt.Sprintf("paused at live seq %d, takeover %v", pausedSeq, takenAt.Sub(pausedAt).Round(time.Millisecond))
		if lg != nil {
			keep := -1
			had := -1
			if st, ok := lg.f.start(next); ok {
				keep, had = st.Keep, st.Had
			}
			line += fmt.Sprintf(", log: %d events, attempt %d kept %d of %d bytes, %d stale events after a newer attempt began",
				lg.events, next, keep, had, lg.f.staleDropped)
			s.tally.count("the paused runner's events in the log after the next attempt began (readers drop them)", "events", lg.f.staleDropped)
		}
		line += fmt.Sprintf("; tabs: stale dropped %v, bytes regenerated %v", tabStale, tabRegen)
		return line
	}
}
