package compat

import (
	"encoding/json"
	"net/http"

	"github.com/tether-dev/tether/internal/task"
)

// OpenAI Chat Completions (PROTOCOL.md 11.2). A completion is a task; a
// repeated POST with the same Idempotency-Key (the SDK's own retry) streams
// the same completion from its start, then live: one task, one bill.

type chatRequest struct {
	Model         *string           `json:"model"`
	Messages      []json.RawMessage `json:"messages"`
	Stream        *bool             `json:"stream"`
	StreamOptions *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Metadata       map[string]string `json:"metadata"`
	N              *float64          `json:"n"`
	Tools          []json.RawMessage `json:"tools"`
	Functions      []json.RawMessage `json:"functions"`
	FunctionCall   json.RawMessage   `json:"function_call"`
	ToolChoice     json.RawMessage   `json:"tool_choice"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Audio               json.RawMessage `json:"audio"`
	Modalities          []string        `json:"modalities"`
	Prediction          json.RawMessage `json:"prediction"`
	Logprobs            *bool           `json:"logprobs"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *float64        `json:"max_tokens"`
	MaxCompletionTokens *float64        `json:"max_completion_tokens"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Seed                *float64        `json:"seed"`
}

// parseChat validates a Chat Completions request.
func parseChat(body chatRequest) (createRequest, bool, error) {
	var req createRequest
	switch {
	case len(body.Tools) > 0:
		return req, false, badParam("tools", "tools are not supported")
	case len(body.Functions) > 0:
		return req, false, badParam("functions", "functions are not supported")
	case present(body.FunctionCall):
		return req, false, badParam("function_call", "function calls are not supported")
	case body.N != nil && *body.N != 1:
		return req, false, badParam("n", "only n = 1 is supported")
	case body.ResponseFormat != nil && body.ResponseFormat.Type != "text":
		return req, false, badParam("response_format", "response_format %q is not supported; only text is", body.ResponseFormat.Type)
	case present(body.Audio):
		return req, false, badParam("audio", "audio output is not supported")
	case len(body.Modalities) > 0 && (len(body.Modalities) != 1 || body.Modalities[0] != "text"):
		return req, false, badParam("modalities", "only the text modality is supported")
	case present(body.Prediction):
		return req, false, badParam("prediction", "predicted outputs are not supported")
	case body.Logprobs != nil && *body.Logprobs:
		return req, false, badParam("logprobs", "logprobs are not supported")
	case len(body.Messages) == 0:
		return req, false, badParam("messages", "messages is required")
	case len(body.Messages) > maxItems+1:
		return req, false, badParam("messages", "messages has %d entries; at most %d are allowed", len(body.Messages), maxItems+1)
	}
	if err := checkToolChoice(body.ToolChoice); err != nil {
		return req, false, err
	}
	if err := checkMetadata(body.Metadata); err != nil {
		return req, false, err
	}
	items := make([]task.PreambleItem, 0, len(body.Messages))
	for i, raw := range body.Messages {
		param := "messages[" + itoa(i) + "]"
		var m struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return req, false, badParam(param, "%s must be a message object", param)
		}
		switch m.Role {
		case "user", "assistant", "system", "developer":
		default:
			return req, false, badParam(param+".role", "role %q is not supported; use user, assistant, system or developer", m.Role)
		}
		if present(m.ToolCalls) {
			return req, false, badParam(param+".tool_calls", "tool calls are not supported")
		}
		text, err := textParts(param+".content", m.Content, "text")
		if err != nil {
			return req, false, err
		}
		items = append(items, task.PreambleItem{Role: m.Role, Text: text})
	}
	last := len(items) - 1
	if items[last].Role != "user" {
		return req, false, badParam("messages["+itoa(last)+"].role", "the last message must be a user message")
	}
	if err := checkContent("messages["+itoa(last)+"].content", items[last].Text); err != nil {
		return req, false, err
	}
	p := &task.Preamble{API: "chat.completions", Items: items[:last], Metadata: body.Metadata,
		Options: options(map[string]*float64{"temperature": body.Temperature, "top_p": body.TopP,
			"max_tokens": body.MaxTokens, "max_completion_tokens": body.MaxCompletionTokens,
			"presence_penalty": body.PresencePenalty, "frequency_penalty": body.FrequencyPenalty, "seed": body.Seed})}
	if body.Model != nil {
		p.Model = *body.Model
	}
	req.content, req.preamble = items[last].Text, p
	req.stream = body.Stream != nil && *body.Stream
	if id, ok := body.Metadata["conversation_id"]; ok {
		conv, err := conversationParam(json.RawMessage(`"` + jsonEscape(id) + `"`))
		if err != nil {
			return req, false, badParam("metadata.conversation_id", "metadata.conversation_id must be a Tether conversation id (a UUID)")
		}
		req.conversation = conv
	}
	usage := body.StreamOptions != nil && body.StreamOptions.IncludeUsage != nil && *body.StreamOptions.IncludeUsage
	return req, usage, nil
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// createChatCompletion is POST /v1/chat/completions.
func (a *api) createChatCompletion(w http.ResponseWriter, r *http.Request, user string) error {
	var body chatRequest
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	req, usage, err := parseChat(body)
	if err != nil {
		return err
	}
	t, err := a.create(r, user, req)
	if err != nil {
		return err
	}
	if req.stream {
		wch, err := a.core.Watch(r.Context(), user, t.ID, false)
		if err != nil {
			return err
		}
		a.streamTask(w, r, wch, nil, &chatEncoder{api: a, usage: usage})
		return nil
	}
	t, err = a.waitEnd(r.Context(), user, t.ID)
	if err != nil {
		return err
	}
	if t.Status != task.StatusDone {
		writeStatusError(w, http.StatusBadGateway, task.Code(endCode(&t)), failureMessage(&t), "")
		return nil
	}
	in, out := usageOf(&t)
	writeJSON(w, http.StatusOK, completion{ID: completionID(t.ID), Object: "chat.completion",
		Created: t.CreatedAt.Unix(), Model: a.modelOf(&t),
		Choices: []completionChoice{{Message: completionMessage{Role: "assistant", Content: t.Output},
			Logprobs: nil, FinishReason: "stop"}},
		Usage: &chatUsage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}})
	return nil
}

// endCode is the error code of a task that ended without its answer.
func endCode(t *task.Task) string {
	if t.Status == task.StatusCancelled {
		return "cancelled"
	}
	return deref(t.Error, "failed")
}

func completionID(taskID string) string { return "chatcmpl-" + taskID }

func (a *api) modelOf(t *task.Task) string {
	if t.Preamble != nil && t.Preamble.Model != "" {
		return t.Preamble.Model
	}
	return a.cfg.DefaultModel
}

type (
	completion struct {
		ID                string             `json:"id"`
		Object            string             `json:"object"`
		Created           int64              `json:"created"`
		Model             string             `json:"model"`
		SystemFingerprint *string            `json:"system_fingerprint"`
		Choices           []completionChoice `json:"choices"`
		Usage             *chatUsage         `json:"usage"`
	}
	completionChoice struct {
		Index        int               `json:"index"`
		Message      completionMessage `json:"message"`
		Logprobs     *struct{}         `json:"logprobs"`
		FinishReason string            `json:"finish_reason"`
	}
	completionMessage struct {
		Role    string  `json:"role"`
		Content string  `json:"content"`
		Refusal *string `json:"refusal"`
	}
	chunk struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		Created           int64         `json:"created"`
		Model             string        `json:"model"`
		SystemFingerprint *string       `json:"system_fingerprint"`
		Choices           []chunkChoice `json:"choices"`
		Usage             *chatUsage    `json:"usage,omitempty"`
	}
	chunkChoice struct {
		Index        int        `json:"index"`
		Delta        chunkDelta `json:"delta"`
		Logprobs     *struct{}  `json:"logprobs"`
		FinishReason *string    `json:"finish_reason"`
	}
	chunkDelta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	chatUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
)

// chatEncoder writes a completion's chunks.
type chatEncoder struct {
	api     *api
	usage   bool
	started bool
	sent    int
}

func (e *chatEncoder) chunk(out *sseWriter, t *task.Task, choices []chunkChoice, usage *chatUsage) error {
	b, err := json.Marshal(chunk{ID: completionID(t.ID), Object: "chat.completion.chunk", Created: t.CreatedAt.Unix(),
		Model: e.api.modelOf(t), Choices: choices, Usage: usage})
	if err != nil {
		return err
	}
	return out.event("", 0, false, b)
}

func (e *chatEncoder) fail(out *sseWriter, code, message string) error {
	b, err := json.Marshal(struct {
		Error openAIError `json:"error"`
	}{openAIError{Message: message, Type: "server_error", Code: task.Code(code)}})
	if err != nil {
		return err
	}
	return out.event("", 0, false, b)
}

func (e *chatEncoder) update(out *sseWriter, a *answer, kept int) (bool, error) {
	t := &a.t
	if kept < e.sent {
		return true, e.fail(out, "restarted", restartMessage)
	}
	if !e.started {
		empty := ""
		if err := e.chunk(out, t, []chunkChoice{{Delta: chunkDelta{Role: "assistant", Content: &empty}}}, nil); err != nil {
			return true, err
		}
		e.started = true
	}
	if n := len(a.text); n > e.sent {
		text := string(a.text[e.sent:])
		if err := e.chunk(out, t, []chunkChoice{{Delta: chunkDelta{Content: &text}}}, nil); err != nil {
			return true, err
		}
		e.sent = n
	}
	switch t.Status {
	case task.StatusDone:
		stop := "stop"
		if err := e.chunk(out, t, []chunkChoice{{Delta: chunkDelta{}, FinishReason: &stop}}, nil); err != nil {
			return true, err
		}
		if e.usage {
			full := a.task()
			in, o := usageOf(&full)
			if err := e.chunk(out, t, []chunkChoice{}, &chatUsage{in, o, in + o}); err != nil {
				return true, err
			}
		}
		return true, out.write([]byte("data: [DONE]\n\n"))
	case task.StatusFailed, task.StatusCancelled:
		return true, e.fail(out, endCode(t), failureMessage(t))
	}
	return false, nil
}
