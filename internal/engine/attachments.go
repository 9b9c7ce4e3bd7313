package engine

import (
	"fmt"
	"strings"

	"github.com/tether-dev/tether/internal/task"
)

// Attachments in a model's context (PROTOCOL.md section 10). A file goes
// with the user message it was attached to: a text file (valid UTF-8 of at
// most 256 KiB that the runner loaded) as its whole text between a header
// and an end line, any other file as one line that names it. Texts share
// the context budget with the history, newest first: the current message's
// files before every earlier one, so what the user just attached is what
// the model reads first. A text that does not fit is named instead, with
// why.

// splitFiles separates the current message's files from the earlier ones,
// which it groups by message.
func splitFiles(files []task.AttachmentFile) (own []task.AttachmentFile, byMessage map[string][]task.AttachmentFile) {
	byMessage = map[string][]task.AttachmentFile{}
	for _, f := range files {
		if f.Own {
			own = append(own, f)
		} else {
			byMessage[f.MessageID] = append(byMessage[f.MessageID], f)
		}
	}
	return own, byMessage
}

// withNames is content with every file named (no texts): what an exchange
// costs at least.
func withNames(content string, files []task.AttachmentFile) string {
	if len(files) == 0 {
		return content
	}
	var b strings.Builder
	b.WriteString(content)
	for _, f := range files {
		paragraph(&b)
		b.WriteString(nameLine(f, ""))
	}
	return b.String()
}

// withFiles is content followed by its files: the text of each text file
// that fits in the remaining budget (estimated tokens, which it returns
// less what the texts cost), a naming line for the others.
func withFiles(content string, files []task.AttachmentFile, remaining int) (string, int) {
	if len(files) == 0 {
		return content, remaining
	}
	var b strings.Builder
	b.WriteString(content)
	for _, f := range files {
		paragraph(&b)
		if !f.IsText {
			b.WriteString(nameLine(f, "not a text file, so not included"))
			continue
		}
		block := textBlock(f)
		cost := (len(block) + 3) / 4
		if !f.TextLoaded || cost > remaining {
			b.WriteString(nameLine(f, "too long for the context, not included"))
			continue
		}
		remaining -= cost
		b.WriteString(block)
	}
	return b.String(), remaining
}

// paragraph starts a new paragraph after what b holds; a message of files
// without text starts with its first file.
func paragraph(b *strings.Builder) {
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
}

func nameLine(f task.AttachmentFile, why string) string {
	s := fmt.Sprintf("[Attached file %q (%s, %d bytes)", f.Name, f.Type, f.Size)
	if why != "" {
		s += ": " + why
	}
	return s + "]"
}

func textBlock(f task.AttachmentFile) string {
	return fmt.Sprintf("[Attached file %q (%s, %d bytes) follows]\n%s\n[End of %q]", f.Name, f.Type, f.Size, f.Text, f.Name)
}
