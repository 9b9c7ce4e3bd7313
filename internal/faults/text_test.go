package faults

import (
	"fmt"
	"strings"

	"github.com/tether-dev/tether/internal/engine/enginetest"
)

// tokenDiff compares got with want token by token. It returns "" when they
// are equal, else the index of the first differing token with a few tokens
// of context on both sides.
func tokenDiff(got, want string) string {
	if got == want {
		return ""
	}
	g := strings.SplitAfter(got, " ")
	w := strings.SplitAfter(want, " ")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	at := func(s []string, i int) string {
		if i < len(s) {
			return fmt.Sprintf("%q", s[i])
		}
		return "(end)"
	}
	ctx := func(s []string, i int) string {
		lo, hi := max(0, i-3), min(len(s), i+4)
		return strings.Join(s[lo:hi], "")
	}
	return fmt.Sprintf("first difference at token %d (1-based %d): got %s, want %s; got …%q…, want …%q…; got %d bytes, want %d",
		i, i+1, at(g, i), at(w, i), ctx(g, i), ctx(w, i), len(got), len(want))
}

// tokensIn is how many whole tokens the first n bytes of a stream answer
// hold, and whether n falls on a token boundary.
func tokensIn(text string, n int) (tokens int, boundary bool) {
	if n > len(text) {
		n = len(text)
	}
	tokens = strings.Count(text[:n], " ")
	return tokens, n == 0 || text[n-1] == ' '
}

// bytesFor is the length of the first k tokens of a stream answer, to wait
// for "k tokens" without counting spaces on every event.
func bytesFor(k int) int { return len(enginetest.StreamText(k)) }
