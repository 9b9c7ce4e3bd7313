package compat

import (
	"cmp"
	"io"
	"net/http"
	"strconv"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// The OpenAI Responses API (PROTOCOL.md 11.1): a response is a task; its
// stream numbers events so that a live stream and any resume from
// starting_after agree event for event: four opening events (0..3), then
// each delta numbered 3 + the answer's byte length at its end, then the
// closing events numbered on.

// response is the Response object.
type response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *incomplete       `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *float64          `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []outputItem      `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       conversationRef   `json:"conversation"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Text               textConfig        `json:"text"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []struct{}        `json:"tools"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	Metadata           map[string]string `json:"metadata"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type conversationRef struct {
	ID string `json:"id"`
}

type textConfig struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type outputItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Status  string        `json:"status"`
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

type contentPart struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responseStatus maps a task's status to a response's.
func responseStatus(s task.Status) string {
	switch s {
	case task.StatusPending:
		return "queued"
	case task.StatusRunning:
		return "in_progress"
	case task.StatusDone:
		return "completed"
	}
	return string(s) // failed, cancelled
}

// itemStatus is the status of the answer's output item.
func itemStatus(s task.Status) string {
	switch {
	case s.Active():
		return "in_progress"
	case s == task.StatusDone:
		return "completed"
	}
	return "incomplete"
}

func textPart(text string) contentPart {
	return contentPart{Type: "output_text", Text: text, Annotations: []struct{}{}}
}

// answerItem is the answer as an output item.
func answerItem(t *task.Task) outputItem {
	return outputItem{ID: itemID(t.ID), Type: "message", Status: itemStatus(t.Status), Role: "assistant",
		Content: []contentPart{textPart(t.Output)}}
}

// responseOf is a task as a Response; withOutput false leaves output empty
// (the opening events, before the output item is added).
func (a *api) responseOf(t *task.Task, withOutput bool) response {
	r := response{ID: t.ID, Object: "response", CreatedAt: t.CreatedAt.Unix(), Status: responseStatus(t.Status),
		Model: a.cfg.DefaultModel, Output: []outputItem{}, Conversation: conversationRef{t.ConversationID},
		Store: true, ToolChoice: "auto", Tools: []struct{}{}, Truncation: "disabled", Metadata: map[string]string{}}
	r.Text.Format.Type = "text"
	if p := t.Preamble; p != nil {
		if p.Model != "" {
			r.Model = p.Model
		}
		r.Background = p.Background
		if p.Instructions != "" {
			r.Instructions = &p.Instructions
		}
		if p.PreviousResponseID != "" {
			r.PreviousResponseID = &p.PreviousResponseID
		}
		if len(p.Metadata) > 0 {
			r.Metadata = p.Metadata
		}
		if v, ok := p.Options["temperature"]; ok {
			r.Temperature = &v
		}
		if v, ok := p.Options["top_p"]; ok {
			r.TopP = &v
		}
		if v, ok := p.Options["max_output_tokens"]; ok {
			r.MaxOutputTokens = &v
		}
	}
	if withOutput && (t.Status != task.StatusPending || t.Output != "") {
		r.Output = []outputItem{answerItem(t)}
	}
	switch t.Status {
	case task.StatusFailed:
		r.Error = &responseError{Code: deref(t.Error, "failed"), Message: failureMessage(t)}
	case task.StatusCancelled:
		r.IncompleteDetails = &incomplete{Reason: "cancelled"}
	}
	if t.Status.Terminal() {
		in, out := usageOf(t)
		r.Usage = &responseUsage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	}
	return r
}

func deref(s *string, otherwise string) string {
	if s == nil || *s == "" {
		return otherwise
	}
	return *s
}

// failureMessage says in words why a task failed.
func failureMessage(t *task.Task) string {
	if t.Status == task.StatusCancelled {
		return "the answer was cancelled"
	}
	switch e := deref(t.Error, ""); e {
	case task.ErrNoRunner:
		return "no runner took the task in time"
	case task.ErrRunnerLost:
		return "the runners answering it were lost"
	case "":
		return "the answer failed"
	default:
		return e
	}
}

// estimateTokens is a tokenizer-free estimate: one token per 4 bytes.
func estimateTokens(s string) int { return (len(s) + 3) / 4 }

// usageOf estimates a task's input and output tokens.
func usageOf(t *task.Task) (in, out int) {
	in = estimateTokens(t.Input)
	if p := t.Preamble; p != nil {
		in += estimateTokens(p.Instructions)
		for _, it := range p.Items {
			in += estimateTokens(it.Text)
		}
	}
	return in, estimateTokens(t.Output)
}

// createResponse is POST /v1/responses.
func (a *api) createResponse(w http.ResponseWriter, r *http.Request, user string) error {
	var body responsesRequest
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	req, err := parseResponses(body)
	if err != nil {
		return err
	}
	t, err := a.create(r, user, req)
	if err != nil {
		return err
	}
	switch {
	case req.stream:
		return a.streamResponse(w, r, user, t.ID, -1)
	case req.background:
		writeJSON(w, http.StatusOK, a.responseOf(&t, true))
		return nil
	}
	t, err = a.waitEnd(r.Context(), user, t.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.responseOf(&t, true))
	return nil
}

// create submits a request of any of the APIs as a task, whose id comes
// from the request's Idempotency-Key (a new one without): in the
// conversation it names, the one of the turn it follows, or one of its own.
func (a *api) create(r *http.Request, user string, req createRequest) (task.Task, error) {
	taskID, err := taskIDFor(user, cmp.Or(req.key, r.Header.Get("Idempotency-Key")))
	if err != nil {
		return task.Task{}, err
	}
	ctx := r.Context()
	sr := task.SubmitRequest{TaskID: taskID, Content: req.content, Preamble: req.preamble,
		ConversationID: req.conversation}
	if req.parent != "" {
		id, ok := protocol.NormalizeUUID(req.parent)
		if !ok {
			return task.Task{}, &paramError{param: "previous_response_id", err: task.Errorf(task.CodeNotFound, "no such response")}
		}
		prev, err := a.core.Task(ctx, user, id)
		if err != nil {
			if task.ErrorCode(err) == task.CodeNotFound {
				return task.Task{}, &paramError{param: "previous_response_id", err: task.Errorf(task.CodeNotFound, "no such response")}
			}
			return task.Task{}, err
		}
		sr.ConversationID, sr.ParentTaskID = prev.ConversationID, prev.ID
	}
	if sr.ConversationID == "" {
		sr.ConversationID = ownConversation(taskID)
	}
	res, err := a.core.Submit(ctx, user, sr)
	if err != nil {
		if task.ErrorCode(err) == task.CodeConflict {
			return task.Task{}, task.Errorf(task.CodeConflict,
				"this Idempotency-Key was used for another request; use a new key for a new request")
		}
		return task.Task{}, err
	}
	return res.Task, nil
}

// getResponse is GET /v1/responses/{id}: the Response as it stands, or with
// stream its events numbered above starting_after.
func (a *api) getResponse(w http.ResponseWriter, r *http.Request, user string) error {
	id, err := responseID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var body struct {
		Stream        *bool  `json:"stream"`
		StartingAfter *int64 `json:"starting_after"`
	}
	// openai-go sends a GET's parameters as a JSON body.
	if r.Body != nil && r.ContentLength != 0 {
		b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 4096))
		if err == nil && len(b) > 0 {
			if err := decodeJSON(b, &body); err != nil {
				return err
			}
		}
	}
	stream := body.Stream != nil && *body.Stream
	if v := q.Get("stream"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badParam("stream", "stream must be true or false")
		}
		stream = b
	}
	after := int64(-1)
	if body.StartingAfter != nil {
		after = *body.StartingAfter
	}
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return badParam("starting_after", "starting_after must be an integer")
		}
		after = n
	}
	if after < -1 {
		return badParam("starting_after", "starting_after must be -1 or more")
	}
	if stream {
		return a.streamResponse(w, r, user, id, after)
	}
	t, err := a.core.Task(r.Context(), user, id)
	if err != nil {
		return notFoundResponse(err)
	}
	writeJSON(w, http.StatusOK, a.responseOf(&t, true))
	return nil
}

// cancelResponse is POST /v1/responses/{id}/cancel.
func (a *api) cancelResponse(w http.ResponseWriter, r *http.Request, user string) error {
	id, err := responseID(r)
	if err != nil {
		return err
	}
	t, err := a.core.Cancel(r.Context(), user, id)
	if err != nil {
		return notFoundResponse(err)
	}
	writeJSON(w, http.StatusOK, a.responseOf(&t, true))
	return nil
}

// responseID reads the id of a response path. An id that is not a task id
// cannot be one of the user's: not found, as a missing one.
func responseID(r *http.Request) (string, error) {
	id, ok := protocol.NormalizeUUID(r.PathValue("id"))
	if !ok {
		return "", task.Errorf(task.CodeNotFound, "no such response")
	}
	return id, nil
}

func notFoundResponse(err error) error {
	if task.ErrorCode(err) == task.CodeNotFound {
		return task.Errorf(task.CodeNotFound, "no such response")
	}
	return err
}

// streamResponse streams a response's events numbered above after. A
// stream from the start replays the deltas as the live stream had them
// (the SDKs' helpers drop what they had by number, so their boundaries must
// be the same); a resume after an event sends the text after it at once.
func (a *api) streamResponse(w http.ResponseWriter, r *http.Request, user, id string, after int64) error {
	wch, err := a.core.Watch(r.Context(), user, id, after < 0)
	if err != nil {
		return notFoundResponse(err)
	}
	a.streamTask(w, r, wch, nil, &responsesEncoder{api: a, last: after, sent: max(0, int(after-3))})
	return nil
}
