package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The stream and subject names of the log, as PROTOCOL.md's deployment
// docs and nats.conf name them; read directly so the harness does not
// depend on the packages being changed.
const (
	tasksStream = "TETHER_TASKS"
	taskPrefix  = "tether.task."
)

// expect is what one scenario's answer must end as, beyond "exact".
type expect struct {
	// attempt the answer ends on: 1 means no new attempt anywhere (not in
	// Postgres, not in the log, not on any tab).
	attempt int
	// atLeast: the answer ends on attempt or a later one. A scenario that
	// takes a runner away expects one takeover; a lease that lapses on its
	// own on a loaded machine adds another, which is the protocol working,
	// not a fault of it: reported, not failed. Every new attempt is still
	// held to continued and noRegenerate.
	atLeast bool
	// continued: every new attempt keeps a non-empty prefix.
	continued bool
	// noRegenerate: every new attempt keeps everything the log holds of the
	// lost one, and every tab that saw the switch dropped nothing.
	noRegenerate bool
}

// logReplay is the task's JetStream log read in stream order.
type logReplay struct {
	f       *follower
	lastPos uint64 // stream sequence of the subject's last message
	events  int
}

// replayLog reads tether.task.<id> of TETHER_TASKS from its first message
// to its last with an ordered consumer and applies the 1.1 rule in stream
// order, from the task as submitted (attempt 1, seq 0, no output).
func replayLog(natsURL, taskID string) (*logReplay, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second), nats.Name("faults log replay"))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	subject := taskPrefix + taskID
	stream, err := js.Stream(ctx, tasksStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", tasksStream, err)
	}
	last, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("last message of %s: %w", subject, err)
	}
	cons, err := js.OrderedConsumer(ctx, tasksStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer on %s: %w", subject, err)
	}
	r := &logReplay{f: newFollower(), lastPos: last.Sequence}
	r.f.jump = true
	r.f.attempt, r.f.maxAttempt, r.f.status = 1, 1, "pending"
	for ctx.Err() == nil {
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("fetch %s: %w", subject, err)
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			r.events++
			var e wireMsg
			if err := json.Unmarshal(m.Data(), &e); err != nil || !isStreamEvent(e.Type) {
				r.f.problem("log message %d is not a stream event: %q", meta.Sequence.Stream, truncate(m.Data(), 200))
			} else {
				r.f.apply(e, meta.Timestamp)
			}
			if meta.Sequence.Stream >= last.Sequence {
				return r, nil
			}
		}
		if err := batch.Error(); err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("fetch %s: %w", subject, err)
		}
	}
	return nil, fmt.Errorf("read %s: only %d events before the deadline (last stream seq %d)", subject, r.events, last.Sequence)
}

// verify checks an answer whose tabs have all reached a terminal status:
// Postgres, the JetStream log and every tab must hold exactly the demo
// engine's answer, with the attempts x says. It returns the Postgres row and
// the log replay for scenario-specific checks.
func (s *system) verify(t testing.TB, a *answer, x expect) (pgTask, *logReplay) {
	t.Helper()
	row, err := s.waitRow(a.taskID, 30*time.Second, "a terminal status in Postgres", func(r pgTask) bool { return isTerminal(r.Status) })
	if err != nil {
		t.Error(err)
	}
	if row.Status != "done" {
		t.Errorf("Postgres: task %s ended %s, want done", a.taskID, row.Status)
	}
	if d := tokenDiff(row.Output, a.want); d != "" {
		t.Errorf("Postgres tasks.output: %s", d)
	}
	switch {
	case x.atLeast && row.Attempt < x.attempt:
		t.Errorf("Postgres: task ended on attempt %d, want %d or later", row.Attempt, x.attempt)
	case x.atLeast && row.Attempt > x.attempt:
		s.notef(t, "NOTE: the task ended on attempt %d, %d more than the fault explains: a lease lapsed on its own (see the runners' logs)", row.Attempt, row.Attempt-x.attempt)
	case !x.atLeast && row.Attempt != x.attempt:
		t.Errorf("Postgres: task ended on attempt %d, want %d", row.Attempt, x.attempt)
	}
	content, mstatus, err := s.messageRow(a.taskID)
	switch {
	case err != nil:
		t.Errorf("Postgres: assistant message of %s: %v", a.taskID, err)
	default:
		if d := tokenDiff(content, a.want); d != "" {
			t.Errorf("Postgres messages.content: %s", d)
		}
		if mstatus != "done" {
			t.Errorf("Postgres: assistant message status %q, want done", mstatus)
		}
	}
	s.notef(t, "Postgres: status %s attempt %d seq %d, %d output bytes, message %s (%d bytes)",
		row.Status, row.Attempt, row.Seq, len(row.Output), mstatus, len(content))

	lg, err := replayLog(s.natsURL, a.taskID)
	if err != nil {
		t.Errorf("JetStream log: %v", err)
	} else {
		s.checkFollower(t, "log", lg.f, a, row, false)
		s.notef(t, "log: %d events to stream seq %d; %s", lg.events, lg.lastPos, lg.f.counters())
		s.checkStarts(t, "log", lg.f, a, x, nil)
		// Every attempt after the first begins in the log with its status
		// event (and keep), never silently.
		for at := 2; at <= lg.f.attempt; at++ {
			if _, ok := lg.f.start(at); !ok {
				t.Errorf("log: no start of attempt %d", at)
			}
		}
	}
	for _, tb := range a.tabs {
		tb.mu.Lock()
		f := tb.f
		resubscribed := tb.connects > 1 || tb.resyncs > 0
		s.checkFollower(t, tb.name, f, a, row, resubscribed)
		var logF *follower
		if lg != nil {
			logF = lg.f
		}
		s.checkStarts(t, tb.name, f, a, x, logF)
		s.notef(t, "%s: connects %d drops %d resyncs %d errors %d; %s", tb.name, tb.connects, len(tb.drops), tb.resyncs, len(tb.errs), f.counters())
		for _, e := range tb.errs {
			s.notef(t, "%s: error reply %s", tb.name, e)
		}
		tb.mu.Unlock()
	}
	return row, lg
}

// checkFollower holds a reader (a tab or the log replay) to the rule.
func (s *system) checkFollower(t testing.TB, who string, f *follower, a *answer, row pgTask, resubscribed bool) {
	t.Helper()
	if f.status != "done" {
		t.Errorf("%s: ended with status %q, want done", who, f.status)
	}
	if d := tokenDiff(string(f.out), a.want); d != "" {
		t.Errorf("%s: output: %s", who, d)
	}
	if f.attempt != row.Attempt || f.maxAttempt != row.Attempt {
		t.Errorf("%s: ended on attempt %d (highest seen %d), Postgres on attempt %d", who, f.attempt, f.maxAttempt, row.Attempt)
	}
	if f.seq != row.Seq {
		t.Errorf("%s: ended at seq %d, Postgres at seq %d", who, f.seq, row.Seq)
	}
	bad := []struct {
		n    int
		what string
	}{
		{f.gaps, "gaps"},
		{f.staleApplied, "stale deltas applied after a higher attempt"},
		{f.missingAttempt, "stream events without attempt"},
		{f.afterTerminal, "events after the attempt's terminal status"},
		{f.keepMismatch, "same-attempt statuses whose keep disagrees with the output"},
		{f.snapshotRegressed, "snapshots of a lower attempt than applied"},
	}
	if !resubscribed {
		bad = append(bad, struct {
			n    int
			what string
		}{f.repeats, "repeated events (the reader never resubscribed)"})
	}
	for _, b := range bad {
		if b.n != 0 {
			t.Errorf("%s: %d %s", who, b.n, b.what)
		}
	}
	if len(f.problems) > 0 {
		t.Logf("%s: anomalies: %s", who, strings.Join(f.problems, "; "))
	}
	if len(f.staleSample) > 0 {
		s.notef(t, "%s: %d stale events dropped, first: %s", who, f.staleDropped, strings.Join(f.staleSample, ", "))
	}
}

// checkStarts checks every switch to a newer attempt the reader saw: keep
// on a token boundary, the new attempt's first delta exactly the next token,
// nothing regenerated when x asks for it, and the same keep as the log's.
func (s *system) checkStarts(t testing.TB, who string, f *follower, a *answer, x expect, logF *follower) {
	t.Helper()
	for _, st := range f.starts {
		keepTokens, boundary := tokensIn(a.want, st.Keep)
		regenerated := st.Had - st.Keep
		s.notef(t, "%s: attempt %d started (%s, seq %d) keeping %d bytes = %d tokens, holding %d bytes: %d bytes to regenerate; first delta %q",
			who, st.Attempt, st.Status, st.Seq, st.Keep, keepTokens, st.Had, regenerated, f.firstDelta[st.Attempt])
		if !boundary {
			t.Errorf("%s: attempt %d keeps %d bytes, not on a token boundary", who, st.Attempt, st.Keep)
		}
		if x.continued && st.Keep == 0 {
			t.Errorf("%s: attempt %d keeps nothing: the answer restarted instead of continuing", who, st.Attempt)
		}
		if x.noRegenerate && regenerated != 0 {
			t.Errorf("%s: attempt %d kept %d bytes while the reader held %d: %d bytes regenerated, want 0",
				who, st.Attempt, st.Keep, st.Had, regenerated)
		}
		if first, ok := f.firstDelta[st.Attempt]; ok {
			if next := fmt.Sprintf("t%d ", keepTokens+1); first != next {
				t.Errorf("%s: attempt %d's first delta is %q, want %q (the token after the kept prefix)", who, st.Attempt, first, next)
			}
		}
		if logF != nil {
			if ls, ok := logF.start(st.Attempt); ok && ls.Keep != st.Keep {
				t.Errorf("%s: attempt %d keeps %d bytes, the log's start keeps %d", who, st.Attempt, st.Keep, ls.Keep)
			}
		}
	}
}

// largestPause is the longest time between two consecutive deltas a reader
// applied, and when it began.
func largestPause(times []time.Time) (time.Duration, time.Time) {
	var best time.Duration
	var at time.Time
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d > best {
			best, at = d, times[i-1]
		}
	}
	return best, at
}

// reportPauses logs, per tab, the pause the fault caused: from the last
// delta before the fault to the first delta after the recovery (NATS back,
// the gateway ready again), and how long after the recovery that delta
// came; the longest gap between deltas after the fault; the tab's
// reconnects and when its snapshot after the fault arrived.
func reportPauses(t *testing.T, s *system, a *answer, faultAt, backAt time.Time, fault, back string) {
	for _, tb := range a.tabs {
		tb.mu.Lock()
		times := append([]time.Time(nil), tb.f.deltaAt...)
		connects, drops := tb.connects, len(tb.drops)
		var snapAfter time.Duration
		for _, at := range tb.snapAt {
			if at.After(faultAt) {
				snapAfter = at.Sub(faultAt)
				break
			}
		}
		tb.mu.Unlock()
		var before, after time.Time
		var afterFault []time.Time
		for _, at := range times {
			if !at.After(faultAt) {
				before = at
			} else {
				afterFault = append(afterFault, at)
			}
			if after.IsZero() && at.After(backAt) {
				after = at
			}
		}
		if before.IsZero() || after.IsZero() {
			s.notef(t, "%s: no delta on both sides of the fault", tb.name)
			continue
		}
		largest, _ := largestPause(append([]time.Time{faultAt}, afterFault...))
		line := fmt.Sprintf("%s: pause %v (last delta %v before %s, first delta %v after %s); longest gap between deltas after %s %v; connects %d drops %d",
			tb.name, after.Sub(before).Round(time.Millisecond), faultAt.Sub(before).Round(time.Millisecond), fault,
			after.Sub(backAt).Round(time.Millisecond), back, fault, largest.Round(time.Millisecond), connects, drops)
		if snapAfter > 0 {
			line += fmt.Sprintf("; snapshot %v after %s", snapAfter.Round(time.Millisecond), fault)
		}
		s.notef(t, "%s", line)
	}
}
