package task

import "testing"

func TestPositionStep(t *testing.T) {
	t.Parallel()
	delta := func(attempt int, seq int64) Event {
		return Event{Type: EventDelta, Attempt: attempt, Seq: seq, Text: "x"}
	}
	status := func(s Status, attempt int, seq int64) Event {
		return Event{Type: EventStatus, Status: s, Attempt: attempt, Seq: seq}
	}
	at := Position{Attempt: 2, Seq: 10}
	tests := []struct {
		name string
		e    Event
		want Step
	}{
		{"older attempt, later seq", delta(1, 11), StepStale},
		{"older attempt's status", status(StatusRunning, 1, 11), StepStale},
		{"repeat", delta(2, 10), StepRepeat},
		{"earlier", delta(2, 3), StepRepeat},
		{"next", delta(2, 11), StepNext},
		{"next status", status(StatusDone, 2, 11), StepNext},
		{"gap", delta(2, 12), StepGap},
		{"new attempt's pending", status(StatusPending, 3, 11), StepStart},
		{"new attempt's running", status(StatusRunning, 3, 11), StepStart},
		{"new attempt after a fenced runner's late events", status(StatusPending, 3, 7), StepStart},
		{"new attempt, events missing before it", status(StatusPending, 3, 12), StepGap},
		{"new attempt's delta before its start", delta(3, 11), StepGap},
		{"new attempt's end before its start", status(StatusFailed, 3, 11), StepGap},
	}
	for _, tt := range tests {
		if got := at.Step(tt.e); got != tt.want {
			t.Errorf("%s: Step = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := (Position{}).Step(status(StatusRunning, 1, 1)); got != StepStart {
		t.Errorf("first event of a task: Step = %d, want StepStart", got)
	}
}

func TestApplyKeepsThePrefix(t *testing.T) {
	t.Parallel()
	tk := Task{Status: StatusRunning, Attempt: 1, Seq: 4, Output: "héllo wörld", Progress: 40}
	// A fenced runner's late event of attempt 1 got ahead of attempt 2's start.
	if got := tk.Apply(Event{Type: EventDelta, Attempt: 1, Seq: 5, Text: " stale"}); got != StepNext {
		t.Fatalf("late event before the new attempt: %d", got)
	}
	start := Event{Type: EventStatus, Status: StatusPending, Attempt: 2, Seq: 5, Keep: len("héllo")}
	if got := tk.Apply(start); got != StepStart {
		t.Fatalf("start: %d", got)
	}
	if tk.Output != "héllo" || tk.Attempt != 2 || tk.Seq != 5 || tk.Status != StatusPending || tk.Progress != 40 {
		t.Fatalf("after start: %+v", tk)
	}
	if got := tk.Apply(Event{Type: EventDelta, Attempt: 1, Seq: 6, Text: " stale"}); got != StepStale {
		t.Fatalf("late event after the new attempt: %d", got)
	}
	tk.Apply(Event{Type: EventDelta, Attempt: 2, Seq: 6, Text: " wörld"})
	if tk.Output != "héllo wörld" {
		t.Fatalf("output %q", tk.Output)
	}

	restart := Task{Attempt: 1, Seq: 3, Output: "abc", Progress: 60}
	if got := restart.Apply(Event{Type: EventStatus, Status: StatusPending, Attempt: 2, Seq: 4}); got != StepStart ||
		restart.Output != "" || restart.Progress != 0 {
		t.Fatalf("keep 0 must clear: %d %+v", got, restart)
	}

	for _, keep := range []int{len("héllo wörld") + 1, 2} { // beyond the output; inside "é"
		short := Task{Attempt: 1, Seq: 4, Output: "héllo wörld"}
		if got := short.Apply(Event{Type: EventStatus, Status: StatusPending, Attempt: 2, Seq: 5, Keep: keep}); got != StepGap {
			t.Errorf("keep %d: %d, want StepGap", keep, got)
		}
		if short.Output != "héllo wörld" || short.Attempt != 1 {
			t.Errorf("keep %d changed the task: %+v", keep, short)
		}
	}
}
