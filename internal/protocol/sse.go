package protocol

import (
	"bytes"
	"io"
	"strconv"
)

// SSEEvent writes one Server-Sent Event: "event: <type>", "id: <id>" (left
// out when id is 0, for a snapshot of a task with no events yet), the data
// and the blank line that ends it, in a single Write so a flush never splits
// an event. Data is compact JSON and has no newline; should it ever have one,
// each line gets its own "data:" field as the SSE format requires.
func SSEEvent(w io.Writer, eventType string, id int64, data []byte) error {
	var b bytes.Buffer
	b.Grow(len(eventType) + len(data) + 40)
	b.WriteString("event: ")
	b.WriteString(eventType)
	b.WriteByte('\n')
	if id != 0 {
		b.WriteString("id: ")
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteByte('\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b.WriteString("data: ")
		b.Write(bytes.TrimSuffix(line, []byte{'\r'}))
		b.WriteByte('\n')
		if !more {
			break
		}
		data = rest
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// SSEComment writes a comment line, which clients ignore; sent periodically it
// keeps proxies from closing an idle stream.
func SSEComment(w io.Writer, text string) error {
	_, err := io.WriteString(w, ": "+text+"\n\n")
	return err
}
