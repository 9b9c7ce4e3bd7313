package faults

import (
	"fmt"
	"strings"
	"time"
)

// This file is the client's rule of PROTOCOL.md 1.1 (sections 3 and 4),
// written from the contract alone so the harness judges the server instead
// of sharing its code: stream events carry attempt; the first status event
// (pending or running) of a new attempt carries keep; a reader orders events
// by (attempt, seq) and drops lower attempts. Tabs and the JetStream log
// replay apply the same rule.

// wireTask is the Task object (section 2) as far as the harness needs it.
type wireTask struct {
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	Attempt   int     `json:"attempt"`
	Seq       int64   `json:"seq"`
	Progress  int     `json:"progress"`
	Output    string  `json:"output"`
	Error     *string `json:"error"`
	ResultRef *string `json:"result_ref"`
}

// wireMsg is any server-to-client object: a stream event, a reply or an
// error. Pointers tell a missing field from a zero one.
type wireMsg struct {
	Type    string    `json:"type"`
	Req     string    `json:"req"`
	TaskID  string    `json:"task_id"`
	Seq     int64     `json:"seq"`
	Attempt *int      `json:"attempt"`
	Text    string    `json:"text"`
	Status  string    `json:"status"`
	Keep    *int      `json:"keep"`
	Error   any       `json:"error"`
	Task    *wireTask `json:"task"`
	Created bool      `json:"created"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
}

func isStreamEvent(typ string) bool { return typ == "delta" || typ == "progress" || typ == "status" }

func isTerminal(status string) bool {
	return status == "done" || status == "failed" || status == "cancelled"
}

// outcome says what the rule did with one event.
type outcome int

const (
	applied outcome = iota
	started         // the first event of a newer attempt: output truncated to keep
	stale           // an older attempt's event, dropped
	repeat          // same attempt, seq already applied, dropped
	gap             // an event that cannot follow what the reader holds
	ignored         // after a gap, until a fresh snapshot
)

// attemptStart records one switch to a newer attempt.
type attemptStart struct {
	Attempt int
	Status  string
	Keep    int
	Seq     int64
	// Had is how many bytes of output the reader held just before: Had-Keep
	// bytes were dropped and will be generated again.
	Had int
	At  time.Time
}

// follower holds (attempt A, seq S, output O) of one task, applies events
// by the rule and counts everything that is not a plain in-order apply.
type follower struct {
	attempt  int
	seq      int64
	out      []byte
	status   string
	terminal bool
	// broken is set by a gap: the reader waits for a fresh snapshot.
	broken bool
	// jump makes a gap count but not break the reader: it applies the event
	// as if it followed, so a log replay with a hole still shows the rest.
	jump bool
	// maxAttempt is the highest attempt the reader ever applied, across
	// snapshots: a delta of a lower one applied later is a stale apply.
	maxAttempt int

	snapshots         int
	appliedN          int
	repeats           int
	gaps              int
	staleDropped      int
	staleApplied      int
	missingAttempt    int
	afterTerminal     int
	keepMismatch      int // a same-attempt status whose keep disagrees with the output
	snapshotRegressed int // a snapshot of a lower attempt than already applied
	ignoredN          int

	// What arrived, judged against the order the protocol promises, from
	// each snapshot (or an attempt's start) on: after a snapshot at seq S,
	// events S+1, S+2, … of its attempt, each once and in order. An event
	// at or below S or already received is doubled; one below the highest
	// received is reordered; a seq never received below the highest one
	// (when the next snapshot or the end closes the stretch) is lost. Events
	// of a lower attempt are stale (the rule drops them). Counted whatever
	// the rule then does with the event, so the figures are what the
	// server sent.
	received  int
	staleRecv int
	doubled   int
	reordered int
	lost      int
	seg       segment

	starts       []attemptStart
	appended     map[int]int       // delta bytes applied per attempt
	firstDelta   map[int]string    // text of each attempt's first applied delta
	firstDeltaAt map[int]time.Time // when it was applied
	deltaAt      []time.Time       // arrival of every applied delta, in order
	lastEventAt  map[int]time.Time // last event of each attempt seen (applied or stale)
	problems     []string          // the first few anomalies, described
	staleSample  []string          // the first few stale events
}

// segment is the stretch of one attempt's events since a snapshot or the
// attempt's start.
type segment struct {
	attempt int
	from    int64 // the snapshot's seq: events after it are expected
	max     int64
	seen    map[int64]bool
}

// open starts a stretch of attempt's events after seq from.
func (g *segment) open(attempt int, from int64) {
	*g = segment{attempt: attempt, from: from, max: from, seen: map[int64]bool{}}
}

// missing is how many seqs between from and the highest received never came.
func (g *segment) missing() int {
	n := 0
	for q := g.from + 1; q <= g.max; q++ {
		if !g.seen[q] {
			n++
		}
	}
	return n
}

// receive judges one arriving event of attempt a at seq.
func (f *follower) receive(a int, seq int64) {
	f.received++
	switch {
	case a < f.seg.attempt:
		f.staleRecv++
		return
	case a > f.seg.attempt:
		f.lost += f.seg.missing()
		f.seg.open(a, seq-1)
	}
	switch {
	case seq <= f.seg.from || f.seg.seen[seq]:
		f.doubled++
		return
	case seq < f.seg.max:
		f.reordered++
	}
	f.seg.seen[seq] = true
	f.seg.max = max(f.seg.max, seq)
}

// closeSegment ends the stretch (a snapshot replaces it, or the reader is
// done): what never came is lost.
func (f *follower) closeSegment() {
	f.lost += f.seg.missing()
	f.seg.open(f.seg.attempt, f.seg.max)
}

func newFollower() *follower {
	f := &follower{
		appended:     map[int]int{},
		firstDelta:   map[int]string{},
		firstDeltaAt: map[int]time.Time{},
		lastEventAt:  map[int]time.Time{},
	}
	f.seg.open(0, 0)
	return f
}

// arrivals sums up what arrived; closeSegment first.
func (f *follower) arrivals() arrivals {
	return arrivals{received: f.received, lost: f.lost, doubled: f.doubled, reordered: f.reordered, stale: f.staleRecv, gaps: f.gaps}
}

func (f *follower) problem(format string, args ...any) {
	if len(f.problems) < 20 {
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

// reset replaces the state with a task as the server gave it (a snapshot,
// or the task of a submitted reply).
func (f *follower) reset(t wireTask) {
	f.snapshots++
	if t.Attempt < f.maxAttempt {
		f.snapshotRegressed++
		f.problem("snapshot of attempt %d (seq %d) after attempt %d was applied", t.Attempt, t.Seq, f.maxAttempt)
	}
	f.closeSegment()
	f.seg.open(t.Attempt, t.Seq)
	f.attempt, f.seq, f.status = t.Attempt, t.Seq, t.Status
	f.out = append(f.out[:0], t.Output...)
	f.terminal = isTerminal(t.Status)
	f.broken = false
	f.maxAttempt = max(f.maxAttempt, t.Attempt)
}

// apply folds one stream event received at (or stored at) time at.
func (f *follower) apply(e wireMsg, at time.Time) outcome {
	f.receive(f.attemptOf(e), e.Seq)
	return f.rule(e, at)
}

// attemptOf is e's attempt, or the reader's for an event without one.
func (f *follower) attemptOf(e wireMsg) int {
	if e.Attempt != nil {
		return *e.Attempt
	}
	return f.attempt
}

// applicable reports whether e can be applied now without a gap: the next
// seq of the reader's attempt, or the start of a newer attempt at most one
// past the reader's seq. Anything else of the reader's attempt or a newer
// one is ahead of it.
func (f *follower) applicable(e wireMsg) bool {
	a := f.attemptOf(e)
	switch {
	case a < f.attempt:
		return true // stale: the rule drops it
	case a == f.attempt:
		return e.Seq <= f.seq+1
	default:
		return e.Type == "status" && (e.Status == "pending" || e.Status == "running") && e.Seq <= f.seq+1
	}
}

// rule folds one event by the 1.1 rule, without counting its arrival.
func (f *follower) rule(e wireMsg, at time.Time) outcome {
	a := f.attemptOf(e)
	if f.broken {
		f.ignoredN++
		return ignored
	}
	if e.Attempt == nil {
		f.missingAttempt++
		f.problem("%s seq %d has no attempt", e.Type, e.Seq)
	}
	if prev, ok := f.lastEventAt[a]; !ok || at.After(prev) {
		f.lastEventAt[a] = at
	}
	switch {
	case a < f.attempt:
		f.staleDropped++
		if len(f.staleSample) < 10 {
			f.staleSample = append(f.staleSample, fmt.Sprintf("%s a%d s%d (holding a%d s%d)", e.Type, a, e.Seq, f.attempt, f.seq))
		}
		return stale
	case a == f.attempt:
		switch {
		case e.Seq <= f.seq:
			f.repeats++
			return repeat
		case e.Seq > f.seq+1:
			f.gaps++
			f.problem("gap: %s a%d seq %d after seq %d", e.Type, a, e.Seq, f.seq)
			if !f.jump {
				f.broken = true
				return gap
			}
		}
		if f.terminal {
			f.afterTerminal++
			f.problem("%s a%d seq %d after the attempt's terminal status %s", e.Type, a, e.Seq, f.status)
		}
		f.seq = e.Seq
		f.appliedN++
		switch e.Type {
		case "delta":
			f.out = append(f.out, e.Text...)
			f.appended[a] += len(e.Text)
			if _, ok := f.firstDelta[a]; !ok {
				f.firstDelta[a], f.firstDeltaAt[a] = e.Text, at
			}
			f.deltaAt = append(f.deltaAt, at)
			if a < f.maxAttempt {
				f.staleApplied++
				f.problem("applied a delta of attempt %d (seq %d) after attempt %d", a, e.Seq, f.maxAttempt)
			}
		case "status":
			if e.Keep != nil && *e.Keep != len(f.out) {
				f.keepMismatch++
				f.problem("status %s a%d seq %d says keep %d while the attempt's output is %d bytes", e.Status, a, e.Seq, *e.Keep, len(f.out))
			}
			f.status = e.Status
			f.terminal = isTerminal(e.Status)
		}
		f.maxAttempt = max(f.maxAttempt, a)
		return applied
	default: // a newer attempt
		keep := 0
		if e.Keep != nil {
			keep = *e.Keep
		}
		if e.Type != "status" || (e.Status != "pending" && e.Status != "running") {
			f.gaps++
			f.broken = true
			f.problem("first event of attempt %d is %s %s seq %d, not a pending/running status", a, e.Type, e.Status, e.Seq)
			return gap
		}
		if e.Seq > f.seq+1 {
			f.gaps++
			f.problem("gap: attempt %d starts at seq %d after seq %d", a, e.Seq, f.seq)
			if !f.jump {
				f.broken = true
				return gap
			}
		}
		if keep < 0 || keep > len(f.out) {
			f.gaps++
			f.broken = true
			f.problem("attempt %d keeps %d bytes but the reader holds %d", a, keep, len(f.out))
			return gap
		}
		f.starts = append(f.starts, attemptStart{Attempt: a, Status: e.Status, Keep: keep, Seq: e.Seq, Had: len(f.out), At: at})
		f.out = f.out[:keep]
		f.attempt, f.seq, f.status, f.terminal = a, e.Seq, e.Status, false
		f.maxAttempt = max(f.maxAttempt, a)
		f.appliedN++
		return started
	}
}

// start returns the record of attempt a's start, if the reader saw one.
func (f *follower) start(a int) (attemptStart, bool) {
	for _, s := range f.starts {
		if s.Attempt == a {
			return s, true
		}
	}
	return attemptStart{}, false
}

// counters is a one-line summary for logs.
func (f *follower) counters() string {
	var per []string
	for a := 1; a <= f.maxAttempt; a++ {
		if n, ok := f.appended[a]; ok {
			per = append(per, fmt.Sprintf("a%d=%d", a, n))
		}
	}
	return fmt.Sprintf("attempt %d seq %d status %s bytes %d (appended %s); applied %d snapshots %d repeats %d gaps %d stale-dropped %d stale-applied %d no-attempt %d after-terminal %d keep-mismatch %d snapshot-regressed %d; received %d lost %d doubled %d reordered %d stale %d",
		f.attempt, f.seq, f.status, len(f.out), strings.Join(per, " "), f.appliedN, f.snapshots, f.repeats, f.gaps, f.staleDropped,
		f.staleApplied, f.missingAttempt, f.afterTerminal, f.keepMismatch, f.snapshotRegressed,
		f.received, f.lost, f.doubled, f.reordered, f.staleRecv)
}
