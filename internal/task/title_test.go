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
	var cases []struct{ In, File, Want string }
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		got := TitleWithFile(c.In, c.File)
		if got != c.Want {
			t.Errorf("TitleWithFile(%q, %q) = %q, want %q", c.In, c.File, got, c.Want)
		}
		if c.File == "" && Title(c.In) != got {
			t.Errorf("Title(%q) = %q, want %q", c.In, Title(c.In), got)
		}
		if n := utf8.RuneCountInString(got); n > TitleRunes {
			t.Errorf("Title(%q) has %d runes", c.In, n)
		}
	}
}
