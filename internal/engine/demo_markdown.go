package engine

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// DemoMarkdown is the answer of the demo's /markdown (PROTOCOL.md section 6),
// byte for byte; docs/protocol.md holds the same text (a test keeps them
// equal), so every client can check its rendering against one answer.
const DemoMarkdown = "## Heading\n" +
	"\n" +
	"A paragraph with **bold**, *italic*, `inline code` and a link to [Tether](https://example.com/tether). " +
	"Some characters take several bytes: café, naïve, 👩‍💻 and 🇫🇷.\n" +
	"\n" +
	"- First item\n" +
	"- Second item\n" +
	"- Third item\n" +
	"\n" +
	"1. One\n" +
	"2. Two\n" +
	"\n" +
	"```go\n" +
	"package main\n" +
	"\n" +
	"import \"fmt\"\n" +
	"\n" +
	"func main() {\n" +
	"\tfmt.Println(\"hello, tether\")\n" +
	"}\n" +
	"```\n" +
	"\n" +
	"| Name | Value |\n" +
	"| --- | --- |\n" +
	"| alpha | 1 |\n" +
	"| beta | 2 |\n" +
	"\n" +
	"done."

// demoMarkdownGap paces /markdown: about 20 ms a chunk.
const demoMarkdownGap = 20 * time.Millisecond

// demoMarkdownSizes are the chunk sizes in bytes, used in turn.
var demoMarkdownSizes = []int{3, 5, 4}

// demoMarkdownSplits are places where a chunk boundary is made on purpose,
// so every client meets them: inside "**" (between its two asterisks),
// inside the fence's opening "```go", inside the code it holds, and inside
// a character made of several code points (between the woman and the
// zero-width joiner of 👩‍💻). A delta is a JSON string, so it is always
// whole code points; "inside a multi-byte character" is a boundary between
// the code points of one character as people see it.
func demoMarkdownSplits() []int {
	at := func(s string, offset int) int { return strings.Index(DemoMarkdown, s) + offset }
	return []int{
		at("**bold**", 1),
		at("```go", 2),
		at("hello, tether", 3),
		at("👩‍💻", len("👩")),
	}
}

// demoMarkdownChunks cuts DemoMarkdown into its deltas: a few bytes each
// (demoMarkdownSizes in turn, moved back to the start of a code point),
// plus the boundaries of demoMarkdownSplits.
func demoMarkdownChunks() []string {
	s := DemoMarkdown
	cuts := demoMarkdownSplits()
	for pos, k := 0, 0; ; k++ {
		next := pos + demoMarkdownSizes[k%len(demoMarkdownSizes)]
		if next >= len(s) {
			break
		}
		for next > pos && !utf8.RuneStart(s[next]) {
			next--
		}
		if next == pos {
			_, w := utf8.DecodeRuneInString(s[pos:])
			next = pos + w
		}
		cuts = append(cuts, next)
		pos = next
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	chunks := make([]string, 0, len(cuts)+1)
	prev := 0
	for _, c := range cuts {
		if c > prev && c < len(s) {
			chunks = append(chunks, s[prev:c])
			prev = c
		}
	}
	return append(chunks, s[prev:])
}
