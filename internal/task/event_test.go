package task

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

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

// TestOrderingCases holds Task.Apply to testdata/ordering.json, the cases
// the browser's applyStreamEvent is held to as well (frontend/test/
// ordering.test.ts): one ordering rule, checked on both sides by the same
// cases. A case folds its events into its task in turn; steps are each
// event's Step and want is the task at the end.
func TestOrderingCases(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/ordering.json")
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		Attempt int
		Seq     int64
		Status  Status
		Output  string
	}
	var cases []struct {
		Name   string
		Task   state
		Events []struct {
			Type     EventType
			Attempt  int
			Seq      int64
			Text     string
			Progress int
			Status   Status
			Keep     int
		}
		Steps []string
		Want  state
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	names := map[Step]string{StepStale: "stale", StepRepeat: "repeat", StepNext: "next", StepStart: "start", StepGap: "gap"}
	for _, c := range cases {
		tk := Task{Attempt: c.Task.Attempt, Seq: c.Task.Seq, Status: c.Task.Status, Output: c.Task.Output}
		var steps []string
		for _, e := range c.Events {
			steps = append(steps, names[tk.Apply(Event{Type: e.Type, Attempt: e.Attempt, Seq: e.Seq, Text: e.Text,
				Progress: e.Progress, Status: e.Status, Keep: e.Keep})])
		}
		if got := fmt.Sprint(steps); got != fmt.Sprint(c.Steps) {
			t.Errorf("%s: steps %s, want %s", c.Name, got, fmt.Sprint(c.Steps))
		}
		if got := (state{tk.Attempt, tk.Seq, tk.Status, tk.Output}); got != c.Want {
			t.Errorf("%s: task ends %+v, want %+v", c.Name, got, c.Want)
		}
	}
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
}
