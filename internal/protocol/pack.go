package protocol

import (
	"bytes"
	"fmt"

	"github.com/tether-dev/tether/internal/task"
)

// A log message of a task holds one event (EncodeEvent) or a pack: the wire
// JSON of consecutive deltas of one task and one attempt, seq n, n+1, ...,
// joined by newlines, byte for byte the WebSocket frame a gateway makes
// when it coalesces them (PROTOCOL.md section 4: compact JSON never holds a
// raw newline). A fast runner packs deltas that come faster than it
// publishes, so a long answer costs the log one message per pack instead of
// one per token, while every client still gets one seq per delta: a reader
// splits the message (Pieces) and handles each piece as the event it is,
// forwarding its bytes unchanged.
//
// A reader that predates packs fails to decode one (it is not a single
// JSON value): every reader of the log must understand packs before any
// runner writes them (docs/deploy.md).

// EncodePack is the log message of events: EncodeEvent of a single event,
// else their wire JSON joined by newlines. It panics unless events are
// consecutive deltas of one task and attempt (a caller's bug).
func EncodePack(events []task.Event) []byte {
	if len(events) == 1 {
		return EncodeEvent(events[0])
	}
	n := 0
	for _, e := range events {
		n += 80 + len(e.TaskID) + len(e.Text) + len(e.Text)/8
	}
	b := make([]byte, 0, n)
	for i, e := range events {
		if e.Type != task.EventDelta || i > 0 && (e.TaskID != events[0].TaskID ||
			e.Attempt != events[0].Attempt || e.Seq != events[i-1].Seq+1) {
			panic(fmt.Sprintf("protocol: a pack holds consecutive deltas of one attempt, not %s %d/%d after %d",
				e.Type, e.Attempt, e.Seq, events[max(i-1, 0)].Seq))
		}
		if i > 0 {
			b = append(b, '\n')
		}
		b = appendHead(b, `{"type":"delta","task_id":`, e)
		b = append(b, `,"text":`...)
		b = appendString(b, e.Text)
		b = append(b, '}')
	}
	return b
}

// Pieces calls fn with each event's bytes of a log message, in order: the
// message itself when it holds one event, each line of a pack. It stops at
// the first error fn returns.
func Pieces(data []byte, fn func(piece []byte) error) error {
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return fn(data)
		}
		if err := fn(data[:i]); err != nil {
			return err
		}
		data = data[i+1:]
	}
}

// DecodeMessage decodes every event of a log message (DecodeEvent of each
// piece) and checks that a pack is what EncodePack makes: consecutive
// deltas of one task and attempt.
func DecodeMessage(data []byte) ([]task.Event, error) {
	var out []task.Event
	err := Pieces(data, func(piece []byte) error {
		e, err := DecodeEvent(piece)
		if err != nil {
			return err
		}
		return appendPacked(&out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PeekMessage is PeekEvent of each piece of a log message, with the checks
// of DecodeMessage but for the task id (the caller knows its task). fn gets
// each event with its bytes.
func PeekMessage(data []byte, fn func(e task.Event, piece []byte)) error {
	if bytes.IndexByte(data, '\n') < 0 {
		e, err := PeekEvent(data)
		if err != nil {
			return err
		}
		fn(e, data)
		return nil
	}
	var (
		events []task.Event
		pieces [][]byte
	)
	err := Pieces(data, func(piece []byte) error {
		e, err := PeekEvent(piece)
		if err != nil {
			return err
		}
		pieces = append(pieces, piece)
		return appendPacked(&events, e)
	})
	if err != nil {
		return err
	}
	for i, e := range events {
		fn(e, pieces[i])
	}
	return nil
}

// appendPacked appends e to a message's events, checking that a pack holds
// consecutive deltas of one task and attempt.
func appendPacked(events *[]task.Event, e task.Event) error {
	if n := len(*events); n > 0 {
		first, prev := (*events)[0], (*events)[n-1]
		if first.Type != task.EventDelta || e.Type != task.EventDelta || e.TaskID != first.TaskID ||
			e.Attempt != first.Attempt || e.Seq != prev.Seq+1 {
			return fmt.Errorf("%w: pack holds %s %d/%d after %s %d/%d", ErrBadEvent,
				e.Type, e.Attempt, e.Seq, prev.Type, prev.Attempt, prev.Seq)
		}
	}
	*events = append(*events, e)
	return nil
}
