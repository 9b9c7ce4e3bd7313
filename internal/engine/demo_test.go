package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tether-dev/tether/internal/engine/enginetest"
)

// recorder is an Output that keeps every call in order.
type recorder struct {
	calls    []string // "d:<text>" or "p:<percent>"
	deltas   []string
	progress []int
	onDelta  func(n int) error
}

func (r *recorder) Delta(text string) error {
	r.calls = append(r.calls, "d:"+text)
	r.deltas = append(r.deltas, text)
	if r.onDelta != nil {
		return r.onDelta(len(r.deltas))
	}
	return nil
}

func (r *recorder) Progress(p int, stage string) error {
	r.calls = append(r.calls, "p:"+strconv.Itoa(p))
	r.progress = append(r.progress, p)
	return nil
}

// fakeSleep records requested sleeps and returns at once (or ctx's error).
type fakeSleep struct{ waits []time.Duration }

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return ctx.Err()
}

// wantProgress is floor(100*i/n) for i=1..n, keeping only changes.
func wantProgress(n int) []int {
	var out []int
	last := 0
	for i := 1; i <= n; i++ {
		if p := 100 * i / n; p != last {
			out = append(out, p)
			last = p
		}
	}
	return out
}

func TestDemoStream(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 7, 100, 250} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			fs := &fakeSleep{}
			rec := &recorder{}
			err := (&Demo{Sleep: fs.sleep}).Run(context.Background(),
				Input{Content: fmt.Sprintf("  /stream %d 40\n", n)}, rec)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			// enginetest.StreamText is what other packages' tests hold
			// answers to: this keeps it the engine's answer.
			if got, want := strings.Join(rec.deltas, ""), enginetest.StreamText(n); got != want {
				t.Fatalf("output = %q, want %q", got, want)
			}
			if len(rec.deltas) != n {
				t.Fatalf("%d deltas, want %d", len(rec.deltas), n)
			}
			if got, w := fmt.Sprint(rec.progress), fmt.Sprint(wantProgress(n)); got != w {
				t.Fatalf("progress = %s, want %s", got, w)
			}
			if rec.progress[len(rec.progress)-1] != 100 {
				t.Fatalf("last progress %d, want 100", rec.progress[len(rec.progress)-1])
			}
			// MS apart: n-1 sleeps of 40ms, none before the first delta.
			if len(fs.waits) != n-1 {
				t.Fatalf("%d sleeps, want %d", len(fs.waits), n-1)
			}
			for _, w := range fs.waits {
				if w != 40*time.Millisecond {
					t.Fatalf("sleep %v, want 40ms", w)
				}
			}
			if rec.calls[0] != "d:t1 " {
				t.Fatalf("first call %q", rec.calls[0])
			}
		})
	}
}

func TestDemoStreamExactSequence(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	if err := (&Demo{Sleep: (&fakeSleep{}).sleep}).Run(context.Background(), Input{Content: "/stream 3 0"}, rec); err != nil {
		t.Fatal(err)
	}
	want := "d:t1 ,p:33,d:t2 ,p:66,d:t3 ,p:100"
	if got := strings.Join(rec.calls, ","); got != want {
		t.Fatalf("calls = %s, want %s", got, want)
	}
}

func TestDemoFail(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	err := (&Demo{Sleep: (&fakeSleep{}).sleep}).Run(context.Background(), Input{Content: "/fail 5 100"}, rec)
	f, ok := AsFailure(err)
	if !ok || f.Message != "demo failure" {
		t.Fatalf("err = %v, want Failure demo failure", err)
	}
	if got := strings.Join(rec.deltas, ""); got != "t1 t2 t3 t4 t5 " {
		t.Fatalf("output = %q", got)
	}
	if got := fmt.Sprint(rec.progress); got != "[20 40 60 80 100]" {
		t.Fatalf("progress = %s", got)
	}
}

func TestDemoMalformedReplies(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"hello there",
		"/stream",
		"/stream 5",
		"/stream 5 10 20",
		"/stream 0 10",
		"/stream 100001 0",
		"/stream 5 10001",
		"/stream -1 10",
		"/stream +5 10",
		"/stream 5 1e3",
		"/stream five 10",
		"/fail 0 0",
		"/STREAM 5 10",
		"/streams 5 10",
		"",
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			fs := &fakeSleep{}
			rec := &recorder{}
			if err := (&Demo{Sleep: fs.sleep}).Run(context.Background(), Input{Content: in}, rec); err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := fmt.Sprintf("Demo reply to %q: try /stream 20 100 or /fail 5 100.", strings.TrimSpace(in))
			if got := strings.Join(rec.deltas, ""); got != want {
				t.Fatalf("reply = %q, want %q", got, want)
			}
			if len(rec.deltas) != len(strings.Fields(want)) {
				t.Fatalf("%d deltas for %d words", len(rec.deltas), len(strings.Fields(want)))
			}
			for i, d := range rec.deltas[:len(rec.deltas)-1] {
				if len(strings.Fields(d)) != 1 || !strings.HasSuffix(d, " ") {
					t.Fatalf("delta %d = %q is not a word and its space", i, d)
				}
			}
			if got, w := fmt.Sprint(rec.progress), fmt.Sprint(wantProgress(len(rec.deltas))); got != w {
				t.Fatalf("progress = %s, want %s", got, w)
			}
			for _, w := range fs.waits {
				if w != 30*time.Millisecond {
					t.Fatalf("word delay %v, want 30ms", w)
				}
			}
		})
	}
}

func TestDemoReplyIsDeterministicAndShort(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 5000)
	a, b := demoReply(long), demoReply(long)
	if strings.Join(a, "") != strings.Join(b, "") {
		t.Fatal("reply is not deterministic")
	}
	if n := len(strings.Join(a, "")); n > 400 {
		t.Fatalf("reply to a long input is %d bytes", n)
	}
}

func TestDemoStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{onDelta: func(n int) error {
		if n == 3 {
			cancel()
		}
		return nil
	}}
	// MS=0: no sleep to notice the cancel, so the per-step check must.
	err := (&Demo{}).Run(ctx, Input{Content: "/stream 100000 0"}, rec)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(rec.deltas) != 3 {
		t.Fatalf("%d deltas after cancel at 3", len(rec.deltas))
	}
}

func TestDemoCancelDuringSleep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{onDelta: func(n int) error {
		if n == 1 {
			cancel()
		}
		return nil
	}}
	// A real timer of 10s: the test only finishes quickly if the sleep
	// selects on ctx.Done().
	done := make(chan error, 1)
	go func() { done <- (&Demo{}).Run(ctx, Input{Content: "/stream 5 10000"}, rec) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("demo did not stop on cancel during its sleep")
	}
	if len(rec.deltas) != 1 {
		t.Fatalf("%d deltas", len(rec.deltas))
	}
}

func TestDemoOutputErrorStops(t *testing.T) {
	t.Parallel()
	stop := errors.New("fenced")
	rec := &recorder{onDelta: func(n int) error {
		if n == 2 {
			return stop
		}
		return nil
	}}
	err := (&Demo{Sleep: (&fakeSleep{}).sleep}).Run(context.Background(), Input{Content: "/stream 10 0"}, rec)
	if !errors.Is(err, stop) || len(rec.deltas) != 2 {
		t.Fatalf("err = %v after %d deltas", err, len(rec.deltas))
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "demo"} {
		e, err := New(name)
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		if _, ok := e.(*Demo); !ok {
			t.Fatalf("New(%q) = %T", name, e)
		}
	}
	_, err := New("gpt-9")
	if err == nil || !strings.Contains(err.Error(), `unknown engine "gpt-9"`) || !strings.Contains(err.Error(), "demo") {
		t.Fatalf("New(gpt-9) err = %v", err)
	}
}

// A new attempt after a lost runner continues the answer at the next byte:
// the kept prefix plus what the engine writes is exactly the whole answer,
// whether the prefix ends between chunks or inside one.
func TestDemoContinuesAfterAKeptPrefix(t *testing.T) {
	t.Parallel()
	full := "t1 t2 t3 t4 t5 "
	for _, keep := range []int{0, 3, 5, 6, len(full) - 1, len(full)} {
		r := &recorder{}
		d := &Demo{Sleep: (&fakeSleep{}).sleep}
		in := Input{Content: "/stream 5 10", Prefix: full[:keep]}
		if err := d.Run(context.Background(), in, r); err != nil {
			t.Fatalf("keep %d: %v", keep, err)
		}
		if got := full[:keep] + strings.Join(r.deltas, ""); got != full {
			t.Errorf("keep %d: prefix + deltas = %q, want %q", keep, got, full)
		}
		for i := 1; i < len(r.progress); i++ {
			if r.progress[i] <= r.progress[i-1] {
				t.Errorf("keep %d: progress %v goes backwards", keep, r.progress)
			}
		}
	}

	reply := &recorder{}
	prefix := "Demo reply to "
	if err := (&Demo{Sleep: (&fakeSleep{}).sleep}).Run(context.Background(), Input{Content: "hi there", Prefix: prefix}, reply); err != nil {
		t.Fatal(err)
	}
	if got := prefix + strings.Join(reply.deltas, ""); !strings.HasPrefix(got, `Demo reply to "hi there"`) {
		t.Errorf("continued reply %q", got)
	}

	err := (&Demo{}).Run(context.Background(), Input{Content: "/stream 5 0", Prefix: "t1 tX"}, &recorder{})
	if !errors.Is(err, ErrCannotContinue) {
		t.Fatalf("a prefix that is not the answer's start: %v, want ErrCannotContinue", err)
	}
}

func TestDemoMarkdown(t *testing.T) {
	t.Parallel()
	fs := &fakeSleep{}
	rec := &recorder{}
	if err := (&Demo{Sleep: fs.sleep}).Run(context.Background(), Input{Content: " /markdown\n"}, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := strings.Join(rec.deltas, ""); got != DemoMarkdown {
		t.Fatalf("output = %q, want DemoMarkdown", got)
	}
	if len(rec.deltas) < 50 {
		t.Fatalf("%d deltas; want chunks of a few bytes", len(rec.deltas))
	}
	for i, d := range rec.deltas {
		if d == "" || len(d) > 8 || !utf8.ValidString(d) {
			t.Fatalf("delta %d = %q: want 1..8 bytes of whole code points", i, d)
		}
	}
	for i, w := range fs.waits {
		if w != 20*time.Millisecond {
			t.Fatalf("wait %d = %v, want 20ms", i, w)
		}
	}
	if len(fs.waits) != len(rec.deltas)-1 {
		t.Fatalf("%d waits for %d deltas", len(fs.waits), len(rec.deltas))
	}
	if got, w := fmt.Sprint(rec.progress), fmt.Sprint(wantProgress(len(rec.deltas))); got != w {
		t.Fatalf("progress = %s, want %s", got, w)
	}
	// The boundaries every client must meet, as offsets in the answer.
	cut := map[int]bool{}
	n := 0
	for _, d := range rec.deltas[:len(rec.deltas)-1] {
		n += len(d)
		cut[n] = true
	}
	for _, c := range []struct {
		name, at string
		offset   int
	}{
		{"inside **", "**bold**", 1},
		{"inside the fence marker", "```go", 2},
		{"inside the fenced code", "hello, tether", 3},
		{"inside 👩‍💻", "👩‍💻", len("👩")},
	} {
		if off := strings.Index(DemoMarkdown, c.at) + c.offset; !cut[off] {
			t.Errorf("no delta boundary %s (byte %d)", c.name, off)
		}
	}
}

// TestDemoMarkdownContinues: a lost runner's /markdown answer goes on at
// the next byte after any kept prefix on a code point boundary, including
// one inside a chunk and one inside a character of several code points.
func TestDemoMarkdownContinues(t *testing.T) {
	t.Parallel()
	for keep := 0; keep <= len(DemoMarkdown); keep++ {
		if keep < len(DemoMarkdown) && !utf8.RuneStart(DemoMarkdown[keep]) {
			continue
		}
		rec := &recorder{}
		in := Input{Content: "/markdown", Prefix: DemoMarkdown[:keep]}
		if err := (&Demo{Sleep: (&fakeSleep{}).sleep}).Run(context.Background(), in, rec); err != nil {
			t.Fatalf("keep %d: %v", keep, err)
		}
		if got := DemoMarkdown[:keep] + strings.Join(rec.deltas, ""); got != DemoMarkdown {
			t.Fatalf("keep %d: continued as %q", keep, strings.Join(rec.deltas, ""))
		}
	}
	err := (&Demo{}).Run(context.Background(), Input{Content: "/markdown", Prefix: "## Hedding"}, &recorder{})
	if !errors.Is(err, ErrCannotContinue) {
		t.Fatalf("a prefix that is not the answer's start: %v, want ErrCannotContinue", err)
	}
}

// TestDemoMarkdownDocumented holds docs/protocol.md's copy of the answer
// equal to the engine's.
func TestDemoMarkdownDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const open, fence = "<!-- demo /markdown: made from internal/engine/demo_markdown.go -->\n````markdown\n", "\n````\n"
	i := strings.Index(doc, open)
	if i < 0 {
		t.Fatalf("docs/protocol.md has no %q", open)
	}
	rest := doc[i+len(open):]
	j := strings.Index(rest, fence)
	if j < 0 {
		t.Fatal("the /markdown block in docs/protocol.md is not closed")
	}
	if got := rest[:j]; got != DemoMarkdown {
		t.Fatalf("docs/protocol.md says\n%s\nthe engine answers\n%s", got, DemoMarkdown)
	}
}
