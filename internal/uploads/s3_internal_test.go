package uploads

import (
	"fmt"
	"testing"
)

// TestResolve: which part is read where, with the parts a stale writer
// can leave beside the recorded ones.
func TestResolve(t *testing.T) {
	t.Parallel()
	p := func(start, end int64) part {
		return part{key: fmt.Sprintf("%d-%d", start, end), start: start, end: end}
	}
	for _, c := range []struct {
		name  string
		parts []part
		want  string
	}{
		{"empty blob", []part{p(0, 0)}, "[]"},
		{"one write", []part{p(0, 0), p(0, 8)}, "[0-8:0-8]"},
		{"a later write at 5 replaces the rest", []part{p(0, 0), p(0, 11), p(5, 8)}, "[0-11:0-5 5-8:5-8]"},
		// A stale writer's short part at 0 beside the recorded 0-8 8-12:
		// it does not reach 8, so the recorded one is read.
		{"stale short part", []part{p(0, 0), p(0, 5), p(0, 8), p(8, 12)}, "[0-8:0-8 8-12:8-12]"},
		// A stale part that covers the next start holds the same bytes
		// of the client's file; the longest is read up to the next start.
		{"stale long part", []part{p(0, 0), p(0, 3), p(0, 8), p(3, 10)}, "[0-8:0-3 3-10:3-10]"},
		{"a hole ends the blob", []part{p(0, 4), p(6, 9)}, "[0-4:0-4]"},
		{"no part at 0", []part{p(3, 9)}, "[]"},
	} {
		got := "["
		for i, s := range resolve(c.parts) {
			if i > 0 {
				got += " "
			}
			got += fmt.Sprintf("%s:%d-%d", s.key, s.from, s.to)
		}
		got += "]"
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
