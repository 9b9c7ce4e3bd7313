package compat

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/task"
)

// The AI SDK's UI message stream (PROTOCOL.md 11.3), for
// useChat({id, resume: true, transport: new DefaultChatTransport({api:
// "<gateway>/v1/chat"})}). A chat is a conversation; each user message a
// task whose id comes from the message's id, so a repeated POST (after F5,
// in another tab) attaches to the same answer.

// uiMessage is the SDK's UIMessage, as far as Tether reads and writes it.
type uiMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Parts    []uiPart        `json:"parts"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

type uiPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type chatPost struct {
	ID        *string           `json:"id"`
	Messages  []json.RawMessage `json:"messages"`
	Trigger   *string           `json:"trigger"`
	MessageID *string           `json:"messageId"`
}

// uiText reads a UI message's text: its text parts joined by newlines. The
// parts that carry no input of the user's (step markers, reasoning, sources,
// data) are passed over; any other (files, tool calls) is refused by name.
func uiText(param string, raw json.RawMessage) (uiMessage, string, error) {
	var m struct {
		ID    string            `json:"id"`
		Role  string            `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return uiMessage{}, "", badParam(param, "%s must be a UI message", param)
	}
	var texts []string
	for i, p := range m.Parts {
		pp := param + ".parts[" + itoa(i) + "]"
		var part struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(p, &part); err != nil {
			return uiMessage{}, "", badParam(pp, "%s must be a message part", pp)
		}
		switch {
		case part.Type == "text":
			if part.Text == nil {
				return uiMessage{}, "", badParam(pp+".text", "a text part needs text")
			}
			texts = append(texts, *part.Text)
		case part.Type == "step-start", part.Type == "reasoning",
			strings.HasPrefix(part.Type, "source-"), strings.HasPrefix(part.Type, "data-"):
		default:
			return uiMessage{}, "", badParam(pp+".type", "message parts of type %q are not supported; only text is", part.Type)
		}
	}
	text := strings.Join(texts, "\n")
	return uiMessage{ID: m.ID, Role: m.Role}, text, validateText(param, text)
}

// postChat is POST /v1/chat: a new message, or a new version of an answer.
func (a *api) postChat(w http.ResponseWriter, r *http.Request, user string) error {
	var body chatPost
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.ID == nil || *body.ID == "" {
		return badParam("id", "id (the chat id) is required")
	}
	if len(body.Messages) == 0 {
		return badParam("messages", "messages is required")
	}
	if len(body.Messages) > maxItems+1 {
		return badParam("messages", "messages has %d entries; at most %d are allowed", len(body.Messages), maxItems+1)
	}
	conv := conversationFor(user, *body.ID)
	lastAt := len(body.Messages) - 1
	last, content, err := uiText("messages["+itoa(lastAt)+"]", body.Messages[lastAt])
	if err != nil {
		return err
	}
	if last.Role != "user" {
		return badParam("messages["+itoa(lastAt)+"].role", "the last message must be a user message")
	}
	trigger := "submit-message"
	if body.Trigger != nil {
		trigger = *body.Trigger
	}
	var t task.Task
	switch trigger {
	case "submit-message":
		t, err = a.submitChatMessage(r, user, conv, last, content, body.Messages[:lastAt])
	case "regenerate-message":
		t, err = a.regenerate(r, user, conv, last)
	default:
		return badParam("trigger", "trigger %q is not supported; use submit-message or regenerate-message", trigger)
	}
	if err != nil {
		return err
	}
	return a.streamChat(w, r, user, t.ID)
}

// submitChatMessage submits the last user message: its id (or the
// Idempotency-Key header) is the key. The body's earlier messages are the
// preamble only of a conversation the server does not have yet.
func (a *api) submitChatMessage(r *http.Request, user, conv string, last uiMessage, content string, earlier []json.RawMessage) (task.Task, error) {
	param := "messages[" + itoa(len(earlier)) + "]"
	if err := checkContent(param+".parts", content); err != nil {
		return task.Task{}, err
	}
	key := cmp.Or(r.Header.Get("Idempotency-Key"), last.ID)
	if key == "" {
		return task.Task{}, badParam(param+".id", "the message needs an id")
	}
	taskID, err := taskIDFor(user, key)
	if err != nil {
		return task.Task{}, err
	}
	ctx := r.Context()
	items, err := a.earlierItems(ctx, user, conv, earlier)
	if err != nil {
		return task.Task{}, err
	}
	p := &task.Preamble{API: "ui", Items: items}
	t, err := a.create(r, user, createRequest{content: content, preamble: p, conversation: conv, key: key})
	if task.ErrorCode(err) == task.CodeConflict {
		// The same message sent again once its conversation existed has
		// no preamble of its own: it is the same message if the content
		// and the chat are.
		if existing, gerr := a.core.Task(ctx, user, taskID); gerr == nil &&
			existing.ConversationID == conv && existing.Input == content {
			return existing, nil
		}
	}
	return t, err
}

// earlierItems are the body's earlier messages as a preamble, for a
// conversation the server does not have yet; for one it has, its own
// history is the context. Only a body with earlier messages asks, so the
// common submit makes no extra round trip.
func (a *api) earlierItems(ctx context.Context, user, conv string, earlier []json.RawMessage) ([]task.PreambleItem, error) {
	if len(earlier) == 0 {
		return nil, nil
	}
	_, _, err := a.core.History(ctx, user, conv, task.Page{Limit: 1})
	switch task.ErrorCode(err) {
	case "":
		return nil, nil
	case task.CodeNotFound:
	default:
		return nil, err
	}
	var items []task.PreambleItem
	for i, raw := range earlier {
		m, text, err := uiText("messages["+itoa(i)+"]", raw)
		if err != nil {
			return nil, err
		}
		if text != "" && (m.Role == "user" || m.Role == "assistant" || m.Role == "system") {
			items = append(items, task.PreambleItem{Role: m.Role, Text: text})
		}
	}
	return items, nil
}

// regenerate makes a new version of the turn of the last user message.
func (a *api) regenerate(r *http.Request, user, conv string, last uiMessage) (task.Task, error) {
	ctx := r.Context()
	turnID, err := taskIDFor(user, last.ID)
	if err != nil || last.ID == "" {
		return task.Task{}, task.Errorf(task.CodeNotFound, "no such message in this chat")
	}
	turn, err := a.core.Task(ctx, user, turnID)
	if err != nil || turn.ConversationID != conv {
		if err == nil || task.ErrorCode(err) == task.CodeNotFound {
			return task.Task{}, task.Errorf(task.CodeNotFound, "no such message in this chat")
		}
		return task.Task{}, err
	}
	key := r.Header.Get("Idempotency-Key")
	taskID, err := taskIDFor(user, key)
	if err != nil {
		return task.Task{}, err
	}
	res, err := a.core.Submit(ctx, user, task.SubmitRequest{TaskID: taskID, ConversationID: conv,
		Content: turn.Input, VersionOf: turn.ID, Preamble: &task.Preamble{API: "ui"}})
	if err != nil {
		return task.Task{}, err
	}
	return res.Task, nil
}

func (a *api) streamChat(w http.ResponseWriter, r *http.Request, user, taskID string) error {
	wch, err := a.core.Watch(r.Context(), user, taskID, false)
	if err != nil {
		return err
	}
	a.streamTask(w, r, wch, http.Header{"X-Vercel-Ai-Ui-Message-Stream": {"v1"}}, &uiEncoder{})
	return nil
}

// active returns the conversation's pending or running tasks, newest first,
// from its newest messages; none for a conversation the user does not have.
func (a *api) active(ctx context.Context, user, conv string) ([]task.Task, error) {
	msgs, _, err := a.core.History(ctx, user, conv, task.Page{Limit: task.MaxLimit})
	if task.ErrorCode(err) == task.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []task.Task
	for _, m := range slices.Backward(msgs) {
		if m.Role != task.RoleAssistant || m.TaskID == nil || m.Status == nil || *m.Status != task.MessageGenerating {
			continue
		}
		t, err := a.core.Task(ctx, user, *m.TaskID)
		if task.ErrorCode(err) == task.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.Status.Active() {
			out = append(out, t)
		}
	}
	return out, nil
}

// resumeChat is GET /v1/chat/{chatId}/stream: the running answer from its
// start (the SDK's resume after F5), or 204.
func (a *api) resumeChat(w http.ResponseWriter, r *http.Request, user string) error {
	ts, err := a.active(r.Context(), user, conversationFor(user, r.PathValue("chatId")))
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return a.streamChat(w, r, user, ts[0].ID)
}

// cancelChat is POST /v1/chat/{chatId}/cancel: the SDK's stop() only ends
// the fetch; this ends the answers.
func (a *api) cancelChat(w http.ResponseWriter, r *http.Request, user string) error {
	ts, err := a.active(r.Context(), user, conversationFor(user, r.PathValue("chatId")))
	if err != nil {
		return err
	}
	ids := []string{}
	for _, t := range ts {
		if _, err := a.core.Cancel(r.Context(), user, t.ID); err != nil {
			return err
		}
		ids = append(ids, t.ID)
	}
	writeJSON(w, http.StatusOK, struct {
		Cancelled []string `json:"cancelled"`
	}{ids})
	return nil
}

// maxChatMessages bounds what /messages returns: the newest of the path.
const maxChatMessages = 1000

// chatMessages is GET /v1/chat/{chatId}/messages: the conversation's
// current path as UIMessage[] (at each turn its newest version), oldest
// first, a running answer with its text so far.
func (a *api) chatMessages(w http.ResponseWriter, r *http.Request, user string) error {
	ctx := r.Context()
	conv := conversationFor(user, r.PathValue("chatId"))
	var all []task.Message
	page := task.Page{Limit: task.MaxLimit}
	for len(all) < maxChatMessages {
		msgs, next, err := a.core.History(ctx, user, conv, page)
		if task.ErrorCode(err) == task.CodeNotFound {
			writeJSON(w, http.StatusOK, []uiMessage{})
			return nil
		}
		if err != nil {
			return err
		}
		all = append(msgs, all...)
		if next == "" {
			break
		}
		page.Before = next
	}
	out := []uiMessage{}
	for _, m := range currentPath(all) {
		if m.TaskID == nil {
			continue
		}
		meta := struct {
			TaskID string  `json:"task_id"`
			Status *string `json:"status,omitempty"`
		}{*m.TaskID, m.Status}
		text, id := m.Content, *m.TaskID
		if m.Role == task.RoleAssistant {
			id = itemID(*m.TaskID)
			if m.Status != nil && *m.Status == task.MessageGenerating {
				t, err := a.core.Task(ctx, user, *m.TaskID)
				if err != nil && task.ErrorCode(err) != task.CodeNotFound {
					return err
				}
				text = t.Output
			}
		}
		b, _ := json.Marshal(meta)
		out = append(out, uiMessage{ID: id, Role: string(m.Role), Parts: []uiPart{{Type: "text", Text: text}}, Metadata: b})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// currentPath picks, from a conversation's messages (oldest first), the
// turns on the path that ends at the newest turn: it, the turn it follows,
// and so on (docs/protocol.md, "Versions").
func currentPath(msgs []task.Message) []task.Message {
	if len(msgs) == 0 {
		return nil
	}
	turns := map[string][]task.Message{}
	parent := map[string]string{}
	for _, m := range msgs {
		if m.TaskID == nil {
			continue
		}
		turns[*m.TaskID] = append(turns[*m.TaskID], m)
		if m.ParentTaskID != nil {
			parent[*m.TaskID] = *m.ParentTaskID
		}
	}
	var tip string
	for _, m := range slices.Backward(msgs) {
		if m.TaskID != nil {
			tip = *m.TaskID
			break
		}
	}
	var path []string
	seen := map[string]bool{}
	for id := tip; id != "" && !seen[id]; id = parent[id] {
		if _, ok := turns[id]; !ok {
			break // the rest is older than what was read
		}
		seen[id] = true
		path = append(path, id)
	}
	slices.Reverse(path)
	var out []task.Message
	for _, id := range path {
		out = append(out, turns[id]...)
	}
	return out
}

// uiEncoder writes the UI message stream of one answer.
type uiEncoder struct {
	started bool
	sent    int
}

func (e *uiEncoder) chunk(out *sseWriter, t *task.Task, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return out.event("", t.Seq, t.Seq > 0, b)
}

type (
	uiStart struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId"`
	}
	uiType struct {
		Type string `json:"type"`
	}
	uiTextChunk struct {
		Type  string  `json:"type"`
		ID    string  `json:"id"`
		Delta *string `json:"delta,omitempty"`
	}
	uiError struct {
		Type      string `json:"type"`
		ErrorText string `json:"errorText"`
	}
)

func (e *uiEncoder) update(out *sseWriter, a *answer, kept int) (bool, error) {
	t := &a.t
	if kept < e.sent {
		if err := e.chunk(out, t, uiError{"error", restartMessage}); err != nil {
			return true, err
		}
		return true, out.write([]byte("data: [DONE]\n\n"))
	}
	part := textPartID(t.ID)
	if !e.started {
		for _, c := range []any{uiStart{"start", itemID(t.ID)}, uiType{"start-step"}, uiTextChunk{Type: "text-start", ID: part}} {
			if err := e.chunk(out, t, c); err != nil {
				return true, err
			}
		}
		e.started = true
	}
	if n := len(a.text); n > e.sent {
		text := string(a.text[e.sent:])
		if err := e.chunk(out, t, uiTextChunk{Type: "text-delta", ID: part, Delta: &text}); err != nil {
			return true, err
		}
		e.sent = n
	}
	var end []any
	switch t.Status {
	case task.StatusDone:
		end = []any{uiTextChunk{Type: "text-end", ID: part}, uiType{"finish-step"}, uiType{"finish"}}
	case task.StatusFailed:
		end = []any{uiError{"error", failureMessage(t)}}
	case task.StatusCancelled:
		end = []any{uiType{"abort"}}
	default:
		return false, nil
	}
	for _, c := range end {
		if err := e.chunk(out, t, c); err != nil {
			return true, err
		}
	}
	return true, out.write([]byte("data: [DONE]\n\n"))
}
