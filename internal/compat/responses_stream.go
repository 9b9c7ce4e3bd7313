package compat

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/tether-dev/tether/internal/task"
)

// The Responses stream (PROTOCOL.md 11.1): the events and their numbering.

// Numbers of the opening events.
const (
	seqCreated     = 0
	seqInProgress  = 1
	seqItemAdded   = 2
	seqPartAdded   = 3
	openingEvents  = 3 // deltas are numbered 3 + the answer's length at their end
	closingEvents  = 4
	restartMessage = "the answer started over; stream it again from the start"
)

// responsesEncoder writes the Responses stream of one task from the event
// after last on. sent is how many bytes of the answer the client has.
type responsesEncoder struct {
	api  *api
	last int64
	sent int
}

func (e *responsesEncoder) emit(out *sseWriter, seq int64, v interface{ setSeq(int64) }) error {
	if seq <= e.last {
		return nil
	}
	v.setSeq(seq)
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	e.last = seq
	return out.event(eventType(v), seq, true, b)
}

func (e *responsesEncoder) update(out *sseWriter, a *answer, kept int) (bool, error) {
	t, n := &a.t, len(a.text)
	if t.Status.Terminal() && e.last > int64(openingEvents+n) {
		// The client is past the deltas, among the closing events.
		e.sent = min(e.sent, n)
	}
	if kept < e.sent && e.last >= openingEvents {
		// A new attempt started over below what the client has.
		err := e.emit(out, e.last+1, &errorEvent{Type: "error", Code: "restarted", Message: restartMessage})
		return true, err
	}
	if e.last < seqCreated {
		if err := e.emit(out, seqCreated, &responseEvent{Type: "response.created", Response: e.api.responseOf(t, false)}); err != nil {
			return true, err
		}
	}
	if t.Status == task.StatusPending && n == 0 {
		return false, nil
	}
	id := itemID(t.ID)
	if e.last < seqPartAdded {
		inProgress := *t
		inProgress.Status = task.StatusRunning
		added := outputItem{ID: id, Type: "message", Status: "in_progress", Role: "assistant", Content: []contentPart{}}
		for _, s := range []struct {
			seq int64
			v   interface{ setSeq(int64) }
		}{
			{seqInProgress, &responseEvent{Type: "response.in_progress", Response: e.api.responseOf(&inProgress, false)}},
			{seqItemAdded, &itemEvent{Type: "response.output_item.added", Item: added}},
			{seqPartAdded, &partEvent{Type: "response.content_part.added", ItemID: id, Part: textPart("")}},
		} {
			if err := e.emit(out, s.seq, s.v); err != nil {
				return true, err
			}
		}
	}
	if n > e.sent {
		from := e.sent
		for from > 0 && !utf8.RuneStart(a.text[from]) {
			from-- // a client's starting_after inside a character
		}
		err := e.emit(out, int64(openingEvents+n), &deltaEvent{Type: "response.output_text.delta", ItemID: id,
			Delta: string(a.text[from:]), Logprobs: []struct{}{}})
		if err != nil {
			return true, err
		}
		e.sent = n
	}
	if !t.Status.Terminal() {
		return false, nil
	}
	full := a.task()
	end := int64(openingEvents + n)
	steps := []struct {
		seq int64
		v   interface{ setSeq(int64) }
	}{
		{end + 1, &textDoneEvent{Type: "response.output_text.done", ItemID: id, Text: full.Output, Logprobs: []struct{}{}}},
		{end + 2, &partEvent{Type: "response.content_part.done", ItemID: id, Part: textPart(full.Output)}},
		{end + 3, &itemEvent{Type: "response.output_item.done", Item: answerItem(&full)}},
		{end + closingEvents, &responseEvent{Type: terminalType(t.Status), Response: e.api.responseOf(&full, true)}},
	}
	for _, s := range steps {
		if err := e.emit(out, s.seq, s.v); err != nil {
			return true, err
		}
	}
	return true, nil
}

func terminalType(s task.Status) string {
	switch s {
	case task.StatusDone:
		return "response.completed"
	case task.StatusFailed:
		return "response.failed"
	}
	return "response.incomplete"
}

// The stream's events. Each carries its type and sequence number first.
type (
	responseEvent struct {
		Type     string   `json:"type"`
		Seq      int64    `json:"sequence_number"`
		Response response `json:"response"`
	}
	itemEvent struct {
		Type        string     `json:"type"`
		Seq         int64      `json:"sequence_number"`
		OutputIndex int        `json:"output_index"`
		Item        outputItem `json:"item"`
	}
	partEvent struct {
		Type         string      `json:"type"`
		Seq          int64       `json:"sequence_number"`
		ItemID       string      `json:"item_id"`
		OutputIndex  int         `json:"output_index"`
		ContentIndex int         `json:"content_index"`
		Part         contentPart `json:"part"`
	}
	deltaEvent struct {
		Type         string     `json:"type"`
		Seq          int64      `json:"sequence_number"`
		ItemID       string     `json:"item_id"`
		OutputIndex  int        `json:"output_index"`
		ContentIndex int        `json:"content_index"`
		Delta        string     `json:"delta"`
		Logprobs     []struct{} `json:"logprobs"`
	}
	textDoneEvent struct {
		Type         string     `json:"type"`
		Seq          int64      `json:"sequence_number"`
		ItemID       string     `json:"item_id"`
		OutputIndex  int        `json:"output_index"`
		ContentIndex int        `json:"content_index"`
		Text         string     `json:"text"`
		Logprobs     []struct{} `json:"logprobs"`
	}
	errorEvent struct {
		Type    string  `json:"type"`
		Seq     int64   `json:"sequence_number"`
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	}
)

func (e *responseEvent) setSeq(n int64) { e.Seq = n }
func (e *itemEvent) setSeq(n int64)     { e.Seq = n }
func (e *partEvent) setSeq(n int64)     { e.Seq = n }
func (e *deltaEvent) setSeq(n int64)    { e.Seq = n }
func (e *textDoneEvent) setSeq(n int64) { e.Seq = n }
func (e *errorEvent) setSeq(n int64)    { e.Seq = n }

// eventType is the SSE event name of an event: its type.
func eventType(v any) string {
	switch e := v.(type) {
	case *responseEvent:
		return e.Type
	case *itemEvent:
		return e.Type
	case *partEvent:
		return e.Type
	case *deltaEvent:
		return e.Type
	case *textDoneEvent:
		return e.Type
	case *errorEvent:
		return e.Type
	}
	return "message"
}
