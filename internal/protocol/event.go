package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/tether-dev/tether/internal/task"
)

// The wire shapes of the three stream events, field for field the event table
// of PROTOCOL.md section 4. The same bytes are stored in JetStream and sent to
// clients, so a gateway forwards them without re-encoding.
type (
	deltaWire struct {
		Type    task.EventType `json:"type"`
		TaskID  string         `json:"task_id"`
		Seq     int64          `json:"seq"`
		Attempt int            `json:"attempt"`
		Text    string         `json:"text"`
	}
	progressWire struct {
		Type     task.EventType `json:"type"`
		TaskID   string         `json:"task_id"`
		Seq      int64          `json:"seq"`
		Attempt  int            `json:"attempt"`
		Progress int            `json:"progress"`
		Stage    string         `json:"stage,omitempty"`
	}
	statusWire struct {
		Type      task.EventType `json:"type"`
		TaskID    string         `json:"task_id"`
		Seq       int64          `json:"seq"`
		Status    task.Status    `json:"status"`
		Attempt   int            `json:"attempt"`
		Error     *string        `json:"error"`
		ResultRef *string        `json:"result_ref"`
	}
	// startWire is a pending or running status event: it may be the first
	// event of its attempt, so it carries the bytes the attempt kept.
	startWire struct {
		statusWire
		Keep int `json:"keep"`
	}
	// otherWire is what an event of an unknown type encodes to; DecodeEvent
	// refuses it. Only the three known types are ever made.
	otherWire struct {
		Type    task.EventType `json:"type"`
		TaskID  string         `json:"task_id"`
		Seq     int64          `json:"seq"`
		Attempt int            `json:"attempt"`
	}
)

// EncodeEvent is the wire JSON of a stream event: exactly the fields its type
// has in PROTOCOL.md. Every event carries its attempt; a pending or running
// status event also carries keep (docs/protocol.md).
//
// Deltas and progress events, the bulk of a long answer, are appended by
// hand (byte for byte what encoding/json makes of their wire structs, which
// the tests hold equal) instead of through reflection.
func EncodeEvent(e task.Event) []byte {
	switch e.Type {
	case task.EventDelta:
		b := make([]byte, 0, 64+len(e.TaskID)+len(e.Text)+len(e.Text)/8)
		b = appendHead(b, `{"type":"delta","task_id":`, e)
		b = append(b, `,"text":`...)
		b = appendString(b, e.Text)
		return append(b, '}')
	case task.EventProgress:
		b := make([]byte, 0, 80+len(e.TaskID)+len(e.Stage))
		b = appendHead(b, `{"type":"progress","task_id":`, e)
		b = append(b, `,"progress":`...)
		b = strconv.AppendInt(b, int64(e.Progress), 10)
		if e.Stage != "" {
			b = append(b, `,"stage":`...)
			b = appendString(b, e.Stage)
		}
		return append(b, '}')
	case task.EventStatus:
		status := statusWire{e.Type, e.TaskID, e.Seq, e.Status, e.Attempt, e.Error, e.ResultRef}
		if e.StartsAttempt() {
			return encode(startWire{status, e.Keep})
		}
		return encode(status)
	}
	return encode(otherWire{e.Type, e.TaskID, e.Seq, e.Attempt})
}

// appendHead appends the fields every event starts with: task_id, seq, attempt.
func appendHead(b []byte, start string, e task.Event) []byte {
	b = append(b, start...)
	b = appendString(b, e.TaskID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"attempt":`...)
	return strconv.AppendInt(b, int64(e.Attempt), 10)
}

// appendString appends s as a JSON string exactly as encoding/json writes it
// (json.Marshal escapes <, > and & too, and U+2028 and U+2029, and turns
// invalid UTF-8 into U+FFFD).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// eventIn is the union of the three shapes for decoding; pointers tell a
// missing field from a zero one.
type eventIn struct {
	Type      task.EventType `json:"type"`
	TaskID    string         `json:"task_id"`
	Seq       int64          `json:"seq"`
	Text      *string        `json:"text"`
	Progress  *int           `json:"progress"`
	Stage     string         `json:"stage"`
	Status    task.Status    `json:"status"`
	Attempt   *int           `json:"attempt"`
	Error     *string        `json:"error"`
	ResultRef *string        `json:"result_ref"`
	Keep      *int           `json:"keep"`
}

// ErrBadEvent is wrapped by every DecodeEvent error: the bytes are not an event
// Tether wrote. Events come from our own runners and stores, so this is an
// internal fault, not a client's.
var ErrBadEvent = errors.New("bad event")

// DecodeEvent is the inverse of EncodeEvent. It checks what the fold and the
// gateway rely on: a known type, a task id, seq >= 1, attempt >= 1, and the
// fields of that type (delta text; progress 0..100; a valid status, and a
// keep that is not negative). Fields that do not belong to the type are
// dropped; a missing keep is 0.
func DecodeEvent(data []byte) (task.Event, error) {
	var in eventIn
	if err := json.Unmarshal(data, &in); err != nil {
		return task.Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if in.TaskID == "" {
		return task.Event{}, fmt.Errorf("%w: no task_id", ErrBadEvent)
	}
	if in.Seq < 1 {
		return task.Event{}, fmt.Errorf("%w: seq %d", ErrBadEvent, in.Seq)
	}
	if in.Attempt == nil || *in.Attempt < 1 {
		return task.Event{}, fmt.Errorf("%w: no attempt", ErrBadEvent)
	}
	e := task.Event{Type: in.Type, TaskID: in.TaskID, Seq: in.Seq, Attempt: *in.Attempt}
	switch in.Type {
	case task.EventDelta:
		if in.Text == nil {
			return task.Event{}, fmt.Errorf("%w: delta without text", ErrBadEvent)
		}
		e.Text = *in.Text
	case task.EventProgress:
		if in.Progress == nil || *in.Progress < 0 || *in.Progress > 100 {
			return task.Event{}, fmt.Errorf("%w: progress missing or outside 0..100", ErrBadEvent)
		}
		e.Progress, e.Stage = *in.Progress, in.Stage
	case task.EventStatus:
		if !in.Status.Valid() {
			return task.Event{}, fmt.Errorf("%w: status %q", ErrBadEvent, in.Status)
		}
		e.Status, e.Error, e.ResultRef = in.Status, in.Error, in.ResultRef
		if in.Keep != nil {
			if *in.Keep < 0 {
				return task.Event{}, fmt.Errorf("%w: keep %d", ErrBadEvent, *in.Keep)
			}
			if e.StartsAttempt() {
				e.Keep = *in.Keep
			}
		}
	default:
		return task.Event{}, fmt.Errorf("%w: type %q", ErrBadEvent, in.Type)
	}
	return e, nil
}
