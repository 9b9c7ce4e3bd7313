package task

import (
	"encoding/json"
	"os"
	"testing"
	"unicode/utf8"
)

// TestTitle checks the cases the browser's titleFrom is held to as well.
func TestTitle(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/titles.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ In, Want string }
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		got := Title(c.In)
		if got != c.Want {
			t.Errorf("Title(%q) = %q, want %q", c.In, got, c.Want)
		}
		if n := utf8.RuneCountInString(got); n > TitleRunes {
			t.Errorf("Title(%q) has %d runes", c.In, n)
		}
	}
}
