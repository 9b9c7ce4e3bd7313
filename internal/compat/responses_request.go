package compat

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// responsesRequest is the body of POST /v1/responses (PROTOCOL.md 11.1):
// the fields Tether reads, and those it must refuse by name rather than
// drop. Anything else is ignored (docs/protocol.md lists both).
type responsesRequest struct {
	Model              *string           `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Stream             *bool             `json:"stream"`
	Background         *bool             `json:"background"`
	Metadata           map[string]string `json:"metadata"`
	Store              *bool             `json:"store"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	MaxOutputTokens    *float64          `json:"max_output_tokens"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Text               *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
	Include    []json.RawMessage `json:"include"`
	Truncation *string           `json:"truncation"`
	Prompt     json.RawMessage   `json:"prompt"`
}

// createRequest is a request of any of the three APIs made ready to submit.
type createRequest struct {
	content  string
	preamble *task.Preamble
	// conversation and parent link the task into a conversation; with
	// neither the task gets a conversation of its own.
	conversation string
	parent       string
	stream       bool
	background   bool
	// key, when set, is the idempotency key in place of the request's
	// Idempotency-Key header (a UI message's id).
	key string
}

// maxItems bounds the earlier items a request may carry.
const maxItems = 200

// parseResponses validates a Responses request.
func parseResponses(body responsesRequest) (createRequest, error) {
	var req createRequest
	switch {
	case body.Store != nil && !*body.Store:
		return req, badParam("store", "store: false is not supported: Tether always stores a response, so that it can be resumed")
	case len(body.Tools) > 0:
		return req, badParam("tools", "tools are not supported")
	case present(body.Prompt):
		return req, badParam("prompt", "prompt templates are not supported; send input")
	case len(body.Include) > 0:
		return req, badParam("include", "include is not supported")
	case body.Text != nil && body.Text.Format != nil && body.Text.Format.Type != "text":
		return req, badParam("text.format", "text.format %q is not supported; only text is", body.Text.Format.Type)
	case body.Truncation != nil && *body.Truncation != "auto" && *body.Truncation != "disabled":
		return req, badParam("truncation", "truncation must be auto or disabled")
	}
	if err := checkToolChoice(body.ToolChoice); err != nil {
		return req, err
	}
	if err := checkMetadata(body.Metadata); err != nil {
		return req, err
	}
	items, content, err := parseInput(body.Input)
	if err != nil {
		return req, err
	}
	p := &task.Preamble{API: "responses", Items: items, Metadata: body.Metadata}
	if body.Model != nil {
		p.Model = *body.Model
	}
	if body.Instructions != nil {
		if err := validateText("instructions", *body.Instructions); err != nil {
			return req, err
		}
		p.Instructions = *body.Instructions
	}
	p.Options = options(map[string]*float64{"temperature": body.Temperature, "top_p": body.TopP,
		"max_output_tokens": body.MaxOutputTokens})
	req.content, req.preamble = content, p
	req.stream = body.Stream != nil && *body.Stream
	req.background = body.Background != nil && *body.Background
	p.Background = req.background

	hasConv := present(body.Conversation)
	if body.PreviousResponseID != nil && *body.PreviousResponseID != "" {
		if hasConv {
			return req, badParam("conversation", "send previous_response_id or conversation, not both")
		}
		req.parent = *body.PreviousResponseID
		p.PreviousResponseID = req.parent
	}
	if hasConv {
		id, err := conversationParam(body.Conversation)
		if err != nil {
			return req, err
		}
		req.conversation = id
	}
	return req, nil
}

// parseInput reads input: a string (one user message), or a list of message
// items. The last item must be a user message: its text is the content; the
// items before it are the preamble.
func parseInput(raw json.RawMessage) ([]task.PreambleItem, string, error) {
	if !present(raw) {
		return nil, "", badParam("input", "input is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil, s, checkContent("input", s)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, "", badParam("input", "input must be a string or a list of items")
	}
	if len(list) == 0 {
		return nil, "", badParam("input", "input has no items")
	}
	if len(list) > maxItems+1 {
		return nil, "", badParam("input", "input has %d items; at most %d are allowed", len(list), maxItems+1)
	}
	items := make([]task.PreambleItem, 0, len(list))
	for i, r := range list {
		param := "input[" + itoa(i) + "]"
		var it struct {
			Type    *string         `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(r, &it); err != nil {
			return nil, "", badParam(param, "%s must be a message item", param)
		}
		if it.Type != nil && *it.Type != "message" {
			return nil, "", badParam(param+".type", "input items of type %q are not supported; only messages are", *it.Type)
		}
		switch it.Role {
		case "user", "assistant", "system", "developer":
		default:
			return nil, "", badParam(param+".role", "role %q is not supported; use user, assistant, system or developer", it.Role)
		}
		text, err := textParts(param+".content", it.Content, "input_text", "output_text")
		if err != nil {
			return nil, "", err
		}
		items = append(items, task.PreambleItem{Role: it.Role, Text: text})
	}
	last := items[len(items)-1]
	if last.Role != "user" {
		return nil, "", badParam("input["+itoa(len(items)-1)+"].role", "the last input item must be a user message")
	}
	return items[:len(items)-1], last.Text, checkContent("input["+itoa(len(items)-1)+"].content", last.Text)
}

// conversationParam reads conversation: a Tether conversation id, as a
// string or {"id": ..}.
func conversationParam(raw json.RawMessage) (string, error) {
	var id string
	if json.Unmarshal(raw, &id) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return "", badParam("conversation", "conversation must be an id or {\"id\": ..}")
		}
		id = obj.ID
	}
	norm, ok := protocol.NormalizeUUID(id)
	if !ok {
		return "", badParam("conversation", "conversation must be a Tether conversation id (a UUID)")
	}
	return norm, nil
}

// checkToolChoice accepts only what means "no tools".
func checkToolChoice(raw json.RawMessage) error {
	if !present(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && (s == "auto" || s == "none") {
		return nil
	}
	return badParam("tool_choice", "tools are not supported; tool_choice may only be auto or none")
}

// checkMetadata applies OpenAI's metadata limits: 16 pairs, keys up to 64
// characters, values up to 512.
func checkMetadata(m map[string]string) error {
	if len(m) > 16 {
		return badParam("metadata", "metadata has %d keys; at most 16 are allowed", len(m))
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > 64 || utf8.RuneCountInString(v) > 512 {
			return badParam("metadata", "metadata keys are at most 64 characters and values at most 512")
		}
		if strings.IndexByte(k+v, 0) >= 0 {
			return badParam("metadata", "metadata must not contain U+0000")
		}
	}
	return nil
}

// options keeps the sampling fields that were sent.
func options(in map[string]*float64) map[string]float64 {
	var out map[string]float64
	for k, v := range in {
		if v != nil {
			if out == nil {
				out = map[string]float64{}
			}
			out[k] = *v
		}
	}
	return out
}
