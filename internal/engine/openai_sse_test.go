package engine

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll returns every event's data and the error that ended the stream.
func readAll(r io.Reader) ([]string, error) {
	s := newSSEReader(r)
	var got []string
	for {
		d, err := s.Next()
		if err != nil {
			return got, err
		}
		got = append(got, string(d))
	}
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	stream := ": comment, a keep-alive\n\n" +
		"data: one\n\n" +
		"data:two, no space\r\n\r\n" +
		"data:  three, two spaces\r\r" +
		"event: message\nid: 7\nretry: 100\ndata: multi\ndata: line\n\n" +
		"data\n\n" + // a field with no colon: empty data
		"event: only an event, no data\n\n" +
		"\n\n\n" +
		"data: ünïcödé 😀\n\n" +
		"data: [DONE]\n" // no blank line before a clean end
	want := []string{"one", "two, no space", " three, two spaces", "multi\nline", "", "ünïcödé 😀", "[DONE]"}
	for name, r := range map[string]io.Reader{
		"whole":       strings.NewReader(stream),
		"byte a time": iotest.OneByteReader(strings.NewReader(stream)),
		"half":        iotest.HalfReader(strings.NewReader(stream)),
	} {
		got, err := readAll(r)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("%s: err %v", name, err)
		}
		if strings.Join(got, "§") != strings.Join(want, "§") {
			t.Fatalf("%s:\n got %q\nwant %q", name, got, want)
		}
	}
}

func TestSSEReaderEnds(t *testing.T) {
	t.Parallel()
	got, err := readAll(strings.NewReader("data: a\n\ndata: {\"cut"))
	if !errors.Is(err, errPartialLine) || len(got) != 1 {
		t.Fatalf("cut line: %q %v", got, err)
	}
	got, err = readAll(strings.NewReader("data: a\r"))
	if !errors.Is(err, io.EOF) || len(got) != 1 || got[0] != "a" {
		t.Fatalf("\\r at the end: %q %v", got, err)
	}
	cutErr := errors.New("connection reset")
	_, err = readAll(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(cutErr)))
	if !errors.Is(err, cutErr) {
		t.Fatalf("read error: %v", err)
	}
	_, err = readAll(strings.NewReader("data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"))
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Fatalf("long line: %v", err)
	}
}
