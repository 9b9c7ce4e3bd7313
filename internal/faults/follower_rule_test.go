package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/engine/enginetest"
)

// TestFollowerRule checks the harness's own reading of the 1.1 rule, without
// any process: a continued attempt, stale events of the lost one, a repeat,
// a gap, a restart with keep 0 and a missing attempt.
func TestFollowerRule(t *testing.T) {
	at := time.Now()
	ev := func(typ string, seq int64, attempt int, text string) wireMsg {
		return wireMsg{Type: typ, TaskID: "x", Seq: seq, Attempt: &attempt, Text: text}
	}
	status := func(seq int64, attempt int, st string, keep *int) wireMsg {
		return wireMsg{Type: "status", TaskID: "x", Seq: seq, Attempt: &attempt, Status: st, Keep: keep}
	}
	keep := func(n int) *int { return &n }

	f := newFollower()
	f.reset(wireTask{ID: "x", Status: "pending", Attempt: 1})
	steps := []struct {
		e    wireMsg
		want outcome
	}{
		{status(1, 1, "running", nil), applied},
		{ev("delta", 2, 1, "t1 "), applied},
		{ev("delta", 3, 1, "t2 "), applied},
		{ev("delta", 3, 1, "t2 "), repeat},
		{ev("delta", 4, 1, "t3 "), applied},
		// Attempt 2 keeps "t1 t2 " (6 bytes): t3 is dropped and regenerated.
		{status(5, 2, "pending", keep(6)), started},
		{ev("delta", 5, 1, "t4 "), stale},
		{status(6, 2, "running", keep(6)), applied},
		{ev("delta", 7, 2, "t3 "), applied},
		{ev("delta", 6, 1, "t4 "), stale},
		{ev("delta", 8, 2, "t4 "), applied},
		{status(9, 2, "done", nil), applied},
	}
	for i, s := range steps {
		if got := f.apply(s.e, at); got != s.want {
			t.Fatalf("step %d (%s a%d s%d): outcome %d, want %d", i, s.e.Type, *s.e.Attempt, s.e.Seq, got, s.want)
		}
	}
	if string(f.out) != "t1 t2 t3 t4 " || !f.terminal || f.attempt != 2 || f.seq != 9 {
		t.Fatalf("state %q %s", f.out, f.counters())
	}
	if f.staleDropped != 2 || f.repeats != 1 || f.gaps != 0 || f.staleApplied != 0 || f.keepMismatch != 0 {
		t.Fatalf("counters %s", f.counters())
	}
	st, ok := f.start(2)
	if !ok || st.Keep != 6 || st.Had != 9 {
		t.Fatalf("start %+v", st)
	}
	if f.firstDelta[2] != "t3 " || f.appended[2] != 6 || f.appended[1] != 9 {
		t.Fatalf("first delta %q appended %v", f.firstDelta[2], f.appended)
	}

	// A gap breaks the reader until a snapshot.
	g := newFollower()
	g.reset(wireTask{ID: "x", Status: "running", Attempt: 1, Seq: 3, Output: "t1 t2 "})
	if o := g.apply(ev("delta", 5, 1, "t4 "), at); o != gap {
		t.Fatalf("gap: outcome %d", o)
	}
	if o := g.apply(ev("delta", 6, 1, "t5 "), at); o != ignored {
		t.Fatalf("after gap: outcome %d", o)
	}
	g.reset(wireTask{ID: "x", Status: "running", Attempt: 1, Seq: 6, Output: "t1 t2 t3 t4 t5 "})
	if o := g.apply(ev("delta", 7, 1, "t6 "), at); o != applied || string(g.out) != "t1 t2 t3 t4 t5 t6 " {
		t.Fatalf("after snapshot: %d %q", o, g.out)
	}

	// A new attempt whose first event is a delta, or that keeps more than
	// the reader holds, is a gap; a status without keep keeps nothing.
	h := newFollower()
	h.reset(wireTask{ID: "x", Status: "running", Attempt: 1, Seq: 2, Output: "t1 "})
	if o := h.apply(ev("delta", 3, 2, "t2 "), at); o != gap {
		t.Fatalf("delta first: %d", o)
	}
	h.reset(wireTask{ID: "x", Status: "running", Attempt: 1, Seq: 2, Output: "t1 "})
	if o := h.apply(status(3, 2, "pending", keep(4)), at); o != gap {
		t.Fatalf("keep beyond output: %d", o)
	}
	h.reset(wireTask{ID: "x", Status: "running", Attempt: 1, Seq: 2, Output: "t1 "})
	if o := h.apply(status(3, 2, "running", nil), at); o != started || len(h.out) != 0 {
		t.Fatalf("no keep: %d %q", o, h.out)
	}

	// An event without attempt is counted (1.1 requires it) and applied as
	// the current attempt's.
	m := newFollower()
	m.reset(wireTask{ID: "x", Status: "running", Attempt: 1, Seq: 1})
	if o := m.apply(wireMsg{Type: "delta", TaskID: "x", Seq: 2, Text: "t1 "}, at); o != applied || m.missingAttempt != 1 {
		t.Fatalf("missing attempt: %d %s", o, m.counters())
	}
	// A snapshot of a lower attempt than applied, then its delta: counted.
	m.reset(wireTask{ID: "x", Status: "running", Attempt: 2, Seq: 5, Output: "t1 "})
	m.reset(wireTask{ID: "x", Status: "running", Attempt: 1, Seq: 5, Output: "t1 "})
	if m.apply(ev("delta", 6, 1, "t2 "), at); m.snapshotRegressed != 1 || m.staleApplied != 1 {
		t.Fatalf("regressed snapshot: %s", m.counters())
	}
}

func TestTokenDiff(t *testing.T) {
	want := enginetest.StreamText(10)
	if d := tokenDiff(want, want); d != "" {
		t.Fatal(d)
	}
	got := "t1 t2 t3 t4 t3 t4 t5 t6 t7 t8 t9 t10 "
	if d := tokenDiff(got, want); d == "" || !strings.Contains(d, "token 4 (1-based 5)") {
		t.Fatalf("diff: %s", d)
	}
	if n, ok := tokensIn(want, len("t1 t2 ")); n != 2 || !ok {
		t.Fatalf("tokensIn: %d %v", n, ok)
	}
	if _, ok := tokensIn(want, 4); ok {
		t.Fatal("4 bytes is not a token boundary")
	}
}
