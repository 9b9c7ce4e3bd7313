package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

const joinSample = "a\"b\\c/d\te\nf\r\x01 é ☃ 😀 日本語 𝄞 end  "

// rawLiteral quotes s as JSON but leaves non-ASCII bytes raw, as most
// servers do, so it can be cut at any byte.
func rawLiteral(s string) string {
	b, _ := json.Marshal(s)
	out := string(b)
	// encoding/json escapes only <, >, & and U+2028/9 beyond ASCII controls;
	// the sample has none of those.
	return out
}

// escapedUnits is s as JSON with every non-ASCII character written as
// \u escapes of its UTF-16 units: a list of pieces that can be cut between.
func escapedUnits(s string) []string {
	var units []string
	for _, r := range s {
		if r < 0x80 {
			b, _ := json.Marshal(string(r))
			units = append(units, string(b[1:len(b)-1]))
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			units = append(units, fmt.Sprintf(`\u%04x`, u))
		}
	}
	return units
}

func join(t *testing.T, literals ...string) string {
	t.Helper()
	var j textJoiner
	var b strings.Builder
	for _, l := range literals {
		s, err := j.Add([]byte(l))
		if err != nil {
			t.Fatalf("Add(%q): %v", l, err)
		}
		b.WriteString(s)
	}
	b.WriteString(j.Flush())
	return b.String()
}

func TestTextJoinerAnyByteCut(t *testing.T) {
	t.Parallel()
	lit := rawLiteral(joinSample)
	body := lit[1 : len(lit)-1]
	for cut := 0; cut <= len(body); cut++ {
		// Only cut between JSON tokens: not inside an escape.
		if cut > 0 && strings.HasSuffix(escapePrefix(body[:cut]), `\`) {
			continue
		}
		got := join(t, `"`+body[:cut]+`"`, `"`+body[cut:]+`"`)
		if got != joinSample {
			t.Fatalf("cut at %d: %q", cut, got)
		}
	}
}

// escapePrefix returns s's trailing run of backslashes and a "\u" escape
// in progress, if any, so the test can avoid cutting inside an escape.
func escapePrefix(s string) string {
	if i := strings.LastIndex(s, `\u`); i >= 0 && len(s)-i < 6 && !strings.HasSuffix(s[:i], `\`) {
		return `\`
	}
	n := len(s) - len(strings.TrimRight(s, `\`))
	if n%2 == 1 {
		return `\`
	}
	return ""
}

func TestTextJoinerSurrogatePairCut(t *testing.T) {
	t.Parallel()
	units := escapedUnits(joinSample)
	for cut := 0; cut <= len(units); cut++ {
		a := `"` + strings.Join(units[:cut], "") + `"`
		b := `"` + strings.Join(units[cut:], "") + `"`
		if got := join(t, a, b); got != joinSample {
			t.Fatalf("cut at unit %d: %q", cut, got)
		}
	}
	// One unit per chunk, the hardest case.
	var lits []string
	for _, u := range units {
		lits = append(lits, `"`+u+`"`)
	}
	if got := join(t, lits...); got != joinSample {
		t.Fatalf("unit per chunk: %q", got)
	}
}

func TestTextJoinerMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, lit := range []string{
		`""`, `"plain"`, `"\u00e9\u2603"`, `"\ud83d\ude00"`, `"\"\\\/\b\f\n\r\t"`,
		`"lone \ud800 high"`, `"lone \udc00 low"`, `"\ud800\ud800\udc00"`, `"\ud83d"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatal(err)
		}
		if got := join(t, lit); got != want {
			t.Errorf("%s: got %q, encoding/json %q", lit, got, want)
		}
	}
	// Invalid UTF-8 that no later chunk completes is passed on as it is;
	// the runner makes it valid.
	if got := join(t, "\"a\xff\"", "\"\xe2\x98\""); got != "a\xff\xe2\x98" {
		t.Errorf("invalid bytes: %q", got)
	}
	if !utf8.ValidString(join(t, "\"\xe2\x98\"", "\"\x83!\"")) {
		t.Errorf("a completed sequence is not valid")
	}
	for _, bad := range []string{``, `"`, `x`, `"\"`, `"\x"`, `"\u12"`, `"\uzzzz"`, `null`} {
		var j textJoiner
		if _, err := j.Add([]byte(bad)); err == nil {
			t.Errorf("Add(%s) accepted", bad)
		}
	}
}
