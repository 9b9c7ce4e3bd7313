package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tether-dev/tether/internal/task"
)

// Limits of the demo directives (PROTOCOL.md section 6).
const (
	demoMaxN  = 100000
	demoMaxMS = 10000
	// demoWordDelay paces the fallback reply: about 30 ms a word.
	demoWordDelay = 30 * time.Millisecond
	// demoQuoteRunes bounds how much of the input the fallback reply quotes,
	// so a 32 KiB input still gets a short reply.
	demoQuoteRunes = 200
	// DemoFailure is the task error of /fail.
	DemoFailure = "demo failure"
)

// Demo is the deterministic engine of PROTOCOL.md section 6, so the whole
// system runs and is testable without a model:
//
//	/stream N MS  N deltas "t1 ", "t2 ", ... MS ms apart, then done
//	/fail N MS    the same deltas, then a Failure "demo failure"
//	/attachments  one line per attachment of the task's own message,
//	              "<name> <size> <sha256 hex>", or "no attachments"; a
//	              message of files without text gets the same answer
//	/markdown     DemoMarkdown in chunks of a few bytes, about 20 ms apart
//	anything else a short reply quoting the input, word by word, then done
//
// Progress after the i-th delta of n is floor(100*i/n), reported only when
// it changes.
type Demo struct {
	// Sleep waits d or until ctx is done, whichever is first, and returns
	// ctx's error in the second case. Tests replace it; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewDemo returns the demo engine with a real clock.
func NewDemo() *Demo { return &Demo{} }

// Run implements Engine. With a Prefix (a lost runner's answer kept by the
// new attempt) it continues right after it: the answer is deterministic, so
// the prefix must be the start of it, and the deltas pick up at the next
// byte. A prefix that is not the start of this input's answer cannot be
// continued (ErrCannotContinue).
func (d *Demo) Run(ctx context.Context, in Input, out Output) error {
	kind, n, ms, ok := parseDirective(in.Content)
	chunks, gap := demoReply(in.Content), demoWordDelay
	switch trimmed := strings.TrimSpace(in.Content); {
	case trimmed == "/attachments", trimmed == "" && hasOwnFiles(in.Attachments):
		chunks = attachmentLines(in.Attachments)
	case trimmed == "/markdown":
		chunks, gap = demoMarkdownChunks(), demoMarkdownGap
	}
	if ok {
		chunks, gap = make([]string, n), time.Duration(ms)*time.Millisecond
		for i := range chunks {
			chunks[i] = "t" + strconv.Itoa(i+1) + " "
		}
	}
	from, rest, ok := resumeAt(chunks, in.Prefix)
	if !ok {
		return fmt.Errorf("demo: the kept text is not the start of this answer: %w", ErrCannotContinue)
	}
	if err := d.stream(ctx, out, chunks, from, rest, gap); err != nil {
		return err
	}
	if kind == "/fail" {
		return &Failure{Message: DemoFailure}
	}
	return nil
}

// resumeAt finds where an answer made of chunks continues after prefix: the
// index of the first chunk not wholly in it and what of that chunk is left.
// ok is false when prefix is not the start of the answer.
func resumeAt(chunks []string, prefix string) (from int, rest string, ok bool) {
	for i, c := range chunks {
		switch {
		case prefix == "":
			return i, c, true
		case strings.HasPrefix(prefix, c):
			prefix = prefix[len(c):]
		case strings.HasPrefix(c, prefix):
			return i, c[len(prefix):], true
		default:
			return 0, "", false
		}
	}
	return len(chunks), "", prefix == ""
}

// stream writes chunks[from:] as deltas (the first as rest, what is left of
// it after a kept prefix), gap apart (nothing before the first), with
// progress by chunk count whenever its value changes. It checks ctx before
// every chunk, so a cancel stops it within one step even when gap is zero.
func (d *Demo) stream(ctx context.Context, out Output, chunks []string, from int, rest string, gap time.Duration) error {
	last := 100 * from / max(len(chunks), 1)
	for i := from; i < len(chunks); i++ {
		c := chunks[i]
		if i == from {
			c = rest
		}
		if i > from && gap > 0 {
			if err := d.sleep(ctx, gap); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := out.Delta(c); err != nil {
			return err
		}
		if p := 100 * (i + 1) / len(chunks); p != last {
			last = p
			if err := out.Progress(p, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *Demo) sleep(ctx context.Context, dur time.Duration) error {
	if d.Sleep != nil {
		return d.Sleep(ctx, dur)
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// parseDirective recognises "/stream N MS" and "/fail N MS": the trimmed
// input split on whitespace into exactly three fields, N and MS unsigned
// decimal integers in range. Anything else is not a directive.
func parseDirective(s string) (kind string, n, ms int, ok bool) {
	f := strings.Fields(s)
	if len(f) != 3 || (f[0] != "/stream" && f[0] != "/fail") {
		return "", 0, 0, false
	}
	n, okN := parseUint(f[1], demoMaxN)
	ms, okMS := parseUint(f[2], demoMaxMS)
	if !okN || !okMS || n < 1 {
		return "", 0, 0, false
	}
	return f[0], n, ms, true
}

// parseUint accepts only ASCII digits (no sign, no spaces) up to max.
func parseUint(s string, max int) (int, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	v := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		v = v*10 + int(r-'0')
	}
	return v, v <= max
}

// demoReply is the fallback answer, split into deltas of one word plus the
// whitespace after it, so the deltas concatenate to the exact reply.
func demoReply(input string) []string {
	q := strings.TrimSpace(input)
	if utf8.RuneCountInString(q) > demoQuoteRunes {
		q = string([]rune(q)[:demoQuoteRunes]) + "…"
	}
	return splitWords(fmt.Sprintf("Demo reply to %q: try /stream 20 100 or /fail 5 100.", q))
}

// splitWords cuts s after each run of whitespace that follows a word.
func splitWords(s string) []string {
	var words []string
	start := 0
	inSpace := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if inSpace && !space {
			words = append(words, s[start:i])
			start = i
		}
		inSpace = space
	}
	if start < len(s) {
		words = append(words, s[start:])
	}
	return words
}

// hasOwnFiles reports whether the task's own message carries files.
func hasOwnFiles(files []task.AttachmentFile) bool {
	for _, f := range files {
		if f.Own {
			return true
		}
	}
	return false
}

// attachmentLines is the answer to /attachments: a line per attachment of
// the task's own message, in order, "<name> <size> <sha256 hex>", the lines
// joined by a newline (one delta each); "no attachments" when it has none.
// The SHA-256 is of the bytes the gateway stored, so a client can check
// them end to end.
func attachmentLines(files []task.AttachmentFile) []string {
	var lines []string
	for _, f := range files {
		if f.Own {
			lines = append(lines, fmt.Sprintf("%s %d %s", f.Name, f.Size, f.SHA256))
		}
	}
	if len(lines) == 0 {
		return []string{"no attachments"}
	}
	for i := range lines[:len(lines)-1] {
		lines[i] += "\n"
	}
	return lines
}
