package protocol

import (
	"bytes"
	"fmt"

	"github.com/tether-dev/tether/internal/task"
)

// PeekEvent reads what a forwarder of an event needs from its wire JSON: its
// type, seq and attempt, and a status event's status (which says whether it
// starts or ends an attempt). It does not decode the rest (a delta's text, a
// status event's error, result_ref and keep), so a gateway that only
// orders events and forwards their bytes pays for a few dozen bytes of
// scanning rather than a full decode, however long the text.
//
// It trusts that data is an event Tether encoded (EncodeEvent: the log and
// the live feed carry nothing else) and checks what ordering relies on, as
// DecodeEvent does: a known type, seq >= 1, attempt >= 1 and a valid
// status; it does not validate the JSON of the fields it skips. The
// returned event's TaskID is empty: the caller knows the task it follows.
func PeekEvent(data []byte) (task.Event, error) {
	var (
		e                         task.Event
		haveType, haveSeq, haveAt bool
		haveStatus                bool
	)
	s := scanner{b: data}
	if !s.byte('{') {
		return task.Event{}, fmt.Errorf("%w: not an object", ErrBadEvent)
	}
	for {
		if haveType && haveSeq && haveAt && (e.Type != task.EventStatus || haveStatus) {
			break
		}
		key, ok := s.key()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			v, ok := s.plainString()
			if !ok {
				return task.Event{}, fmt.Errorf("%w: type", ErrBadEvent)
			}
			switch string(v) {
			case string(task.EventDelta):
				e.Type = task.EventDelta
			case string(task.EventProgress):
				e.Type = task.EventProgress
			case string(task.EventStatus):
				e.Type = task.EventStatus
			default:
				return task.Event{}, fmt.Errorf("%w: type %q", ErrBadEvent, v)
			}
			haveType = true
		case "seq":
			n, ok := s.uint()
			if !ok {
				return task.Event{}, fmt.Errorf("%w: seq", ErrBadEvent)
			}
			e.Seq, haveSeq = n, true
		case "attempt":
			n, ok := s.uint()
			if !ok || n > 1<<31-1 {
				return task.Event{}, fmt.Errorf("%w: attempt", ErrBadEvent)
			}
			e.Attempt, haveAt = int(n), true
		case "status":
			v, ok := s.plainString()
			if !ok {
				return task.Event{}, fmt.Errorf("%w: status", ErrBadEvent)
			}
			for _, st := range task.Statuses {
				if string(v) == string(st) {
					e.Status, haveStatus = st, true
				}
			}
			if !haveStatus {
				return task.Event{}, fmt.Errorf("%w: status %q", ErrBadEvent, v)
			}
		default:
			if !s.skipValue() {
				return task.Event{}, fmt.Errorf("%w: field %q", ErrBadEvent, key)
			}
		}
		if !s.byte(',') {
			break
		}
	}
	switch {
	case !haveType:
		return task.Event{}, fmt.Errorf("%w: no type", ErrBadEvent)
	case !haveSeq || e.Seq < 1:
		return task.Event{}, fmt.Errorf("%w: seq %d", ErrBadEvent, e.Seq)
	case !haveAt || e.Attempt < 1:
		return task.Event{}, fmt.Errorf("%w: no attempt", ErrBadEvent)
	case e.Type == task.EventStatus && !haveStatus:
		return task.Event{}, fmt.Errorf("%w: status event without status", ErrBadEvent)
	case len(data) == 0 || data[len(data)-1] != '}':
		return task.Event{}, fmt.Errorf("%w: not an object", ErrBadEvent)
	}
	return e, nil
}

// scanner walks the top level of a compact JSON object, as encoding/json
// writes it (no white space).
type scanner struct {
	b []byte
	i int
}

func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// key reads `"name":` and returns name (without escapes: Tether's keys have none).
func (s *scanner) key() ([]byte, bool) {
	k, ok := s.plainString()
	if !ok || !s.byte(':') {
		return nil, false
	}
	return k, true
}

// plainString reads a string without escapes and returns its bytes.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	j := bytes.IndexByte(s.b[s.i:], '"')
	if j < 0 {
		return nil, false
	}
	v := s.b[s.i : s.i+j]
	if bytes.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	s.i += j + 1
	return v, true
}

// uint reads a non-negative integer.
func (s *scanner) uint() (int64, bool) {
	start := s.i
	var n int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if n > (1<<63-1-9)/10 {
			return 0, false
		}
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	return n, s.i > start
}

// skipValue steps over a string, a number, true, false or null: the values
// an event's other fields have.
func (s *scanner) skipValue() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		s.i++
		for {
			j := bytes.IndexByte(s.b[s.i:], '"')
			if j < 0 {
				return false
			}
			// The quote ends the string unless an odd number of
			// backslashes escapes it.
			k := s.i + j
			n := 0
			for k-1-n >= s.i && s.b[k-1-n] == '\\' {
				n++
			}
			s.i = k + 1
			if n%2 == 0 {
				return true
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		s.i++
		for s.i < len(s.b) && numberByte(s.b[s.i]) {
			s.i++
		}
		return true
	}
	for _, lit := range [...]string{"null", "true", "false"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return true
		}
	}
	return false
}

func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
