package task

// EventType names a stream event of a task (PROTOCOL.md section 4).
type EventType string

const (
	EventDelta    EventType = "delta"
	EventProgress EventType = "progress"
	EventStatus   EventType = "status"
)

// Event is one numbered event of a task's stream. Seq counts up by one per
// event of a task, across attempts; only the writer holding the task (the
// runner of the current attempt, or the store for a task no runner holds)
// assigns it. Every event carries its Attempt, so a reader can fence out a
// runner that lost its lease and woke up (PROTOCOL.md section 3).
type Event struct {
	Type    EventType
	TaskID  string
	Seq     int64
	Attempt int

	// Text is the delta's text.
	Text string
	// Progress (0..100) and an optional Stage for progress events.
	Progress int
	Stage    string
	// Status, Error and ResultRef for status events.
	Status    Status
	Error     *string
	ResultRef *string
	// Keep is, on a pending or running status event, the number of bytes of
	// output the attempt kept from the attempt before it (0: it starts over).
	Keep int
}

// Terminal reports whether e ends its attempt.
func (e Event) Terminal() bool { return e.Type == EventStatus && e.Status.Terminal() }

// StartsAttempt reports whether e can be the first event of its attempt: a
// pending or running status event, which carries the attempt's Keep.
func (e Event) StartsAttempt() bool {
	return e.Type == EventStatus && e.Status.Active()
}

// StatusEvent is the status event that announces t's current state at t.Seq.
func StatusEvent(t Task) Event {
	e := Event{Type: EventStatus, TaskID: t.ID, Seq: t.Seq, Status: t.Status,
		Attempt: t.Attempt, Error: t.Error, ResultRef: t.ResultRef}
	if t.Status.Active() {
		e.Keep = t.Keep
	}
	return e
}

// Msg is one event of a task's stream as the bus carries it, from the
// runner's publish to the tabs: the event, its wire JSON (forwarded to
// clients as it is) and, when it was read from the log, the sequence in the
// log's stream of the message that holds it (0 for a live message, whose
// position a core subscriber is not told). A log message may be a pack of
// deltas (internal/protocol): the bus hands it on as one Msg per delta,
// each with its own Data and the pack's StreamPos. A live Msg's Event holds what a forwarder needs (type, seq,
// attempt, a status event's status and the task id); the rest is in Data.
type Msg struct {
	Event     Event
	Data      []byte
	StreamPos uint64
}

// Position is where a reader of a task's stream stands: the attempt and seq
// of the last event it applied. Readers order events by (attempt, seq).
type Position struct {
	Attempt int
	Seq     int64
}

// PositionOf is the position of a snapshot.
func PositionOf(t Task) Position { return Position{Attempt: t.Attempt, Seq: t.Seq} }

// Before reports whether p sorts before q in (attempt, seq) order.
func (p Position) Before(q Position) bool {
	return p.Attempt < q.Attempt || p.Attempt == q.Attempt && p.Seq < q.Seq
}

// Step says what a reader at a position does with the next event it sees.
type Step int

const (
	// StepStale: an event of an attempt older than the reader's; drop it.
	StepStale Step = iota
	// StepRepeat: already applied (same attempt, seq at or below); drop it.
	StepRepeat
	// StepNext: the next event of the reader's attempt; apply it.
	StepNext
	// StepStart: the first event of a newer attempt; truncate the output to
	// its Keep, then apply it. Its seq may be at or below the reader's when
	// a fenced-out runner's late events got ahead of it.
	StepStart
	// StepGap: something is missing before e; fill it from the log or take a
	// fresh snapshot, never skip it.
	StepGap
)

// Step is the one ordering rule every reader of a task's events follows
// (gateways, their recent-events buffers, the log fold, SSE; the browser
// client mirrors it): events are ordered by (attempt, seq), a lower attempt
// is stale, and a newer attempt begins only with a status event that starts
// it and follows on from what the reader has. testdata/ordering.json holds
// Task.Apply and the browser's applyStreamEvent to the same cases.
func (p Position) Step(e Event) Step {
	switch {
	case e.Attempt < p.Attempt:
		return StepStale
	case e.Attempt == p.Attempt:
		switch {
		case e.Seq <= p.Seq:
			return StepRepeat
		case e.Seq == p.Seq+1:
			return StepNext
		}
		return StepGap
	case e.StartsAttempt() && e.Seq <= p.Seq+1:
		return StepStart
	}
	return StepGap
}

// Apply folds e into the snapshot t, exactly as PROTOCOL.md section 2 defines
// a snapshot, and reports the step it took (StepOn): only StepNext and
// StepStart change t. A newer attempt keeps the first Keep bytes of the
// output.
func (t *Task) Apply(e Event) Step {
	step := StepOn(PositionOf(*t), t.Output, e)
	switch step {
	case StepStart:
		t.Output = t.Output[:e.Keep]
		if e.Keep == 0 {
			t.Progress = 0
		}
		t.Keep = e.Keep
	case StepNext:
	default:
		return step
	}
	t.Seq = e.Seq
	switch e.Type {
	case EventDelta:
		t.Output += e.Text
	case EventProgress:
		t.Progress = e.Progress
	case EventStatus:
		t.Status, t.Attempt, t.Error, t.ResultRef = e.Status, e.Attempt, e.Error, e.ResultRef
	}
	return step
}

// StepOn is the step a reader at p whose output so far is output takes for
// e: Position.Step, and a newer attempt's Keep must fall within the output
// on a character boundary (else the reader is missing text the new attempt
// kept: a gap). Apply follows it; a reader that keeps its output in a
// buffer of its own (an encoder of a long answer) follows it too.
func StepOn[T string | []byte](p Position, output T, e Event) Step {
	step := p.Step(e)
	if step == StepStart && (e.Keep < 0 || e.Keep > len(output) || !runeStart(output, e.Keep)) {
		return StepGap
	}
	return step
}

// runeStart reports whether byte i of s begins a character (or is its end).
func runeStart[T string | []byte](s T, i int) bool {
	return i == len(s) || s[i]&0xC0 != 0x80
}
