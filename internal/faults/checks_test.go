package faults

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/eventually"
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
	// late is how many events were stored after a later one of their
	// attempt (a publish retried after its ack was lost): the replay waited
	// for them, as a reader filling a gap from the log does.
	late int
}

// replayLog reads tether.task.<id> of TETHER_TASKS from its first message
// to its last with an ordered consumer and applies the 1.1 rule from the
// task as submitted (attempt 1, seq 0, no output), in stream order, except
// that an event ahead of the reader waits for the ones before it to turn up
// further on in the log: Tether's own readers fill a gap from the log the
// same way. What never turns up is applied at the end, as a gap.
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
	r.f.seg.open(1, 0)
	var held []heldEvent
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
			// A log message is one event, or a pack of deltas, one a line
			// (docs/protocol.md).
			for _, line := range bytes.Split(m.Data(), []byte("\n")) {
				r.events++
				var e wireMsg
				if err := json.Unmarshal(line, &e); err != nil || !isStreamEvent(e.Type) {
					r.f.problem("log message %d is not a stream event: %q", meta.Sequence.Stream, truncate(line, 200))
				} else {
					r.f.receive(r.f.attemptOf(e), e.Seq)
					held = append(held, heldEvent{e, meta.Timestamp})
					held = r.applyHeld(held)
				}
			}
			if meta.Sequence.Stream >= last.Sequence {
				r.late = r.f.reordered
				// What never turned up: applied in (attempt, seq) order as
				// gaps, so the rest still shows.
				slices.SortStableFunc(held, func(x, y heldEvent) int {
					if c := cmp.Compare(r.f.attemptOf(x.e), r.f.attemptOf(y.e)); c != 0 {
						return c
					}
					return cmp.Compare(x.e.Seq, y.e.Seq)
				})
				for _, h := range held {
					r.f.rule(h.e, h.at)
				}
				r.f.closeSegment()
				return r, nil
			}
		}
		if err := batch.Error(); err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("fetch %s: %w", subject, err)
		}
	}
	return nil, fmt.Errorf("read %s: only %d events before the deadline (last stream seq %d)", subject, r.events, last.Sequence)
}

// replayLogRetry is replayLog, read again while it fails for up to 30 s:
// in a cluster, a fetch right after its consumer was made can find no
// responder yet (the consumer's interest still crossing the routes), and
// right after a fault a stream may have no leader for a few seconds.
func replayLogRetry(natsURL, taskID string) (*logReplay, error) {
	var lg *logReplay
	var last error
	err := eventually.Within(30*time.Second, "a read of the log", func() (bool, error) {
		lg, last = replayLog(natsURL, taskID)
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (last error: %v)", err, last)
	}
	return lg, nil
}

type heldEvent struct {
	e  wireMsg
	at time.Time
}

// applyHeld applies every held event that can now follow the reader, in
// the order they were stored, until none can; it returns the rest.
func (r *logReplay) applyHeld(held []heldEvent) []heldEvent {
	for progress := true; progress; {
		progress = false
		for i, h := range held {
			if r.f.applicable(h.e) {
				r.f.rule(h.e, h.at)
				held = append(held[:i], held[i+1:]...)
				progress = true
				break
			}
		}
	}
	return held
}

// verify checks an answer whose tabs have all reached a terminal status:
// Postgres, the JetStream log and every tab must hold exactly the demo
// engine's answer, with the attempts x says. It returns the Postgres row and
// the log replay for scenario-specific checks.
func (s *system) verify(t testing.TB, a *answer, x expect) (pgTask, *logReplay) {
	t.Helper()
	pgOK := true
	pgFail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		pgOK = false
	}
	row, err := s.waitRow(a.taskID, 30*time.Second, "a terminal status in Postgres", func(r pgTask) bool { return isTerminal(r.Status) })
	if err != nil {
		pgFail("%v", err)
	}
	if row.Status != "done" {
		pgFail("Postgres: task %s ended %s, want done", a.taskID, row.Status)
	}
	if d := tokenDiff(row.Output, a.want); d != "" {
		pgFail("Postgres tasks.output: %s", d)
	}
	switch {
	case x.atLeast && row.Attempt < x.attempt:
		pgFail("Postgres: task ended on attempt %d, want %d or later", row.Attempt, x.attempt)
	case x.atLeast && row.Attempt > x.attempt:
		s.notef(t, "NOTE: the task ended on attempt %d, %d more than the fault explains: a lease lapsed on its own (see the runners' logs)", row.Attempt, row.Attempt-x.attempt)
	case !x.atLeast && row.Attempt != x.attempt:
		pgFail("Postgres: task ended on attempt %d, want %d", row.Attempt, x.attempt)
	}
	content, mstatus, err := s.messageRow(a.taskID)
	switch {
	case err != nil:
		pgFail("Postgres: assistant message of %s: %v", a.taskID, err)
	default:
		if d := tokenDiff(content, a.want); d != "" {
			pgFail("Postgres messages.content: %s", d)
		}
		if mstatus != "done" {
			pgFail("Postgres: assistant message status %q, want done", mstatus)
		}
	}
	s.notef(t, "Postgres: status %s attempt %d seq %d, %d output bytes, message %s (%d bytes)",
		row.Status, row.Attempt, row.Seq, len(row.Output), mstatus, len(content))

	tl := s.tally
	tl.mu.Lock()
	tl.answers++
	tl.attempts[row.Attempt]++
	if pgOK {
		tl.pgExact++
	}
	tl.mu.Unlock()

	// Right after a fault the log may answer "no responders" for a moment
	// (a stream leader being elected), and a tab may have seen the last
	// event live (core NATS) a moment before the log's replicas stored it:
	// read it again until it answers and holds what Postgres holds.
	var lg *logReplay
	err = eventually.Within(30*time.Second, "the log holding seq "+strconv.FormatInt(row.Seq, 10), func() (bool, error) {
		r, rerr := replayLog(s.natsURL, a.taskID)
		if rerr == nil {
			lg = r
		}
		return rerr == nil && r.f.seq >= row.Seq, nil
	})
	if lg != nil {
		err = nil // judged below
	} else {
		lg, err = replayLogRetry(s.natsURL, a.taskID) // for its error
	}
	if err != nil {
		t.Errorf("JetStream log: %v", err)
	} else {
		logOK := s.checkFollower(t, "log", lg.f, a, row, false, false)
		s.notef(t, "log: %d events to stream seq %d; %s", lg.events, lg.lastPos, lg.f.counters())
		s.checkStarts(t, "log", lg.f, a, x, nil)
		// Every attempt after the first begins in the log with its status
		// event (and keep), never silently.
		for at := 2; at <= lg.f.attempt; at++ {
			if _, ok := lg.f.start(at); !ok {
				t.Errorf("log: no start of attempt %d", at)
				logOK = false
			}
		}
		tl.mu.Lock()
		if logOK {
			tl.logExact++
		}
		tl.log.add(lg.f.arrivals())
		tl.mu.Unlock()
	}
	for _, tb := range a.tabs {
		tb.mu.Lock()
		f := tb.f
		f.closeSegment()
		resubscribed := tb.connects > 1 || tb.resyncs > 0
		ok := s.checkFollower(t, tb.name, f, a, row, resubscribed, true)
		var logF *follower
		if lg != nil {
			logF = lg.f
		}
		s.checkStarts(t, tb.name, f, a, x, logF)
		s.notef(t, "%s: connects %d drops %d resyncs %d unsolicited snapshots %d errors %d; %s", tb.name, tb.connects, len(tb.drops), tb.resyncs, tb.unsolicited, len(tb.errs), f.counters())
		for _, e := range tb.errs {
			s.notef(t, "%s: error reply %s", tb.name, e)
		}
		arr := f.arrivals()
		arr.unsolicited = tb.unsolicited
		tb.mu.Unlock()
		tl.mu.Lock()
		if ok {
			tl.tabExact++
		}
		tl.tabs.add(arr)
		tl.mu.Unlock()
	}
	return row, lg
}

// checkFollower holds a reader (a tab or the log replay) to the rule and
// reports whether it ended exact. A tab (strict) must also have received
// nothing lost, doubled, reordered or stale.
func (s *system) checkFollower(t testing.TB, who string, f *follower, a *answer, row pgTask, resubscribed, strict bool) bool {
	t.Helper()
	ok := true
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}
	if f.status != "done" {
		fail("%s: ended with status %q, want done", who, f.status)
	}
	if d := tokenDiff(string(f.out), a.want); d != "" {
		fail("%s: output: %s", who, d)
	}
	if f.attempt != row.Attempt || f.maxAttempt != row.Attempt {
		fail("%s: ended on attempt %d (highest seen %d), Postgres on attempt %d", who, f.attempt, f.maxAttempt, row.Attempt)
	}
	if f.seq != row.Seq {
		fail("%s: ended at seq %d, Postgres at seq %d", who, f.seq, row.Seq)
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
	if strict {
		bad = append(bad, []struct {
			n    int
			what string
		}{
			{f.lost, "events lost (a seq skipped while later ones came)"},
			{f.doubled, "events doubled (a seq at or below one already received)"},
			{f.reordered, "events reordered (a seq after a higher one)"},
			{f.staleRecv, "stale events (of an attempt older than the tab's) sent to the tab"},
		}...)
	}
	for _, b := range bad {
		if b.n != 0 {
			fail("%s: %d %s", who, b.n, b.what)
		}
	}
	if len(f.problems) > 0 {
		t.Logf("%s: anomalies: %s", who, strings.Join(f.problems, "; "))
	}
	if len(f.staleSample) > 0 {
		s.notef(t, "%s: %d stale events dropped, first: %s", who, f.staleDropped, strings.Join(f.staleSample, ", "))
	}
	return ok
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

// reportPauses logs, per tab, the pause the fault caused: the longest gap
// between two deltas from the last delta before the fault to the end (the
// answer may go on through the fault, or stop until the recovery), and how
// long after the recovery (NATS back, Postgres started) the first delta came;
// the tab's reconnects and when its snapshot after the fault arrived. The
// longest gap goes into the scenario's figures.
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
		longest, from := largestPause(append([]time.Time{before}, afterFault...))
		line := fmt.Sprintf("%s: longest pause %v, from %v after %s (last delta %v before it); first delta %v after %s; connects %d drops %d",
			tb.name, longest.Round(time.Millisecond), from.Sub(faultAt).Round(time.Millisecond), fault, faultAt.Sub(before).Round(time.Millisecond),
			after.Sub(backAt).Round(time.Millisecond), back, connects, drops)
		if snapAfter > 0 {
			line += fmt.Sprintf("; snapshot %v after %s", snapAfter.Round(time.Millisecond), fault)
		}
		s.notef(t, "%s", line)
		s.tally.time(fmt.Sprintf("longest pause between deltas on each tab, from the last delta before %s", fault), longest)
	}
}
