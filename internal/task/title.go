package task

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// TitleRunes bounds a conversation title made from its first message.
const TitleRunes = 48

var (
	titleLink    = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	titleLead    = regexp.MustCompile(`^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)+`)
	titleMarkup  = regexp.MustCompile("[*_`~]+")
	titleFencing = regexp.MustCompile("^```+\\s*\\S*$")
)

// Title makes a short, clean title from a conversation's first message: its
// first paragraph (the lines up to a blank line or a code fence; a fence's
// opening line before it is skipped), with Markdown markup dropped (headings, quotes, list markers, emphasis, code
// ticks; a link by its text), whitespace collapsed, and cut after at most
// TitleRunes runes at a word boundary with "…". A directive such as
// "/stream 300 30" is shown as it was typed. The browser makes the same
// title for a conversation it has not heard back about (frontend
// src/lib/titles.ts); testdata/titles.json holds both to the same cases.
func Title(content string) string { return TitleWithFile(content, "") }

// TitleWithFile is Title for a first message that carries files: when its
// text gives no title (a message of files alone), the conversation is
// called after its first file, the name as it is (whitespace collapsed,
// cut like any title). firstFile is "" for a message without files.
func TitleWithFile(content, firstFile string) string {
	var lines []string
	for _, l := range strings.Split(content, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || titleFencing.MatchString(l) {
			if len(lines) > 0 {
				break
			}
			continue
		}
		lines = append(lines, titleLead.ReplaceAllString(l, ""))
	}
	line := strings.Join(lines, " ")
	line = titleLink.ReplaceAllString(line, "$1")
	line = titleMarkup.ReplaceAllString(line, "")
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		line = strings.Join(strings.Fields(firstFile), " ")
	}
	if line == "" {
		return "New conversation"
	}
	if utf8.RuneCountInString(line) <= TitleRunes {
		return line
	}
	runes := []rune(line)
	cut := string(runes[:TitleRunes-1])
	if i := strings.LastIndexByte(cut, ' '); i >= len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:.-–—") + "…"
}
