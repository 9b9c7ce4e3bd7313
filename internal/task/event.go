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
// assigns it.
type Event struct {
	Type   EventType
	TaskID string
	Seq    int64

	// Text is the delta's text.
	Text string
	// Progress (0..100) and an optional Stage for progress events.
	Progress int
	Stage    string
	// Status, Attempt, Error and ResultRef for status events.
	Status    Status
	Attempt   int
	Error     *string
	ResultRef *string
}

// Terminal reports whether e ends its attempt.
func (e Event) Terminal() bool { return e.Type == EventStatus && e.Status.Terminal() }

// StatusEvent is the status event that announces t's current state at t.Seq.
func StatusEvent(t Task) Event {
	return Event{Type: EventStatus, TaskID: t.ID, Seq: t.Seq, Status: t.Status,
		Attempt: t.Attempt, Error: t.Error, ResultRef: t.ResultRef}
}

// Apply folds e into the snapshot t, exactly as PROTOCOL.md section 2 defines
// a snapshot: a status event of a newer attempt clears the output. Events at or
// below t.Seq are ignored; the caller checks for gaps.
func (t *Task) Apply(e Event) {
	if e.Seq <= t.Seq {
		return
	}
	t.Seq = e.Seq
	switch e.Type {
	case EventDelta:
		t.Output += e.Text
	case EventProgress:
		t.Progress = e.Progress
	case EventStatus:
		if e.Attempt > t.Attempt {
			t.Output, t.Progress = "", 0
		}
		t.Status, t.Attempt, t.Error, t.ResultRef = e.Status, e.Attempt, e.Error, e.ResultRef
	}
}
