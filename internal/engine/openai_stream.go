package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// Stages of the OpenAI engine's progress events (docs/engines.md).
const (
	stageConnecting = "connecting"
	stageThinking   = "thinking"
	stageGenerating = "generating"
	stageDone       = "done"
)

// openProgressTokens shapes progress when no MaxTokens is set: half of the
// way to 50% after this many tokens (see generationProgress).
const openProgressTokens = 500

// generationProgress is the progress after tokens generated tokens. An LLM
// has no true percentage: with a MaxTokens cap it is the share of the cap
// used (at most 99: the answer may end at any point before it); without
// one it rises quickly at first, then ever more slowly, and never passes 50,
// so a long answer does not look nearly done. Both are monotonic in tokens;
// 100 is reported only when the stream completes.
func generationProgress(tokens, maxTokens int) int {
	switch {
	case tokens <= 0:
		return 0
	case maxTokens > 0:
		return min(max(tokens*100/maxTokens, 1), 99)
	default:
		return 1 + 49*tokens/(tokens+openProgressTokens)
	}
}

// chatChunk is one event of a chat completions stream. Content is kept raw
// so textJoiner can decode it byte-exactly.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content json.RawMessage `json:"content"`
			// Reasoning models stream their thinking under one of these
			// names (vLLM, DeepSeek: reasoning_content; Ollama: reasoning).
			// It is not part of the answer, but it is a sign of life.
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// streamState is what one Run has received and written. Only the Run's own
// goroutine touches it.
type streamState struct {
	out       Output
	maxTokens int

	started      bool // text reached the Output: no retry from here on
	lastProgress int  // the last progress reported, -1 before any

	// Per try (reset before each request).
	joiner  textJoiner
	pending strings.Builder // text received but not yet written
	tokens  int             // chunks with content or reasoning, about one token each
	alive   bool            // the server has generated something
	usage   *chatUsage
	finish  string
}

func (s *streamState) reset() {
	s.joiner = textJoiner{}
	s.pending.Reset()
	s.tokens, s.alive, s.usage, s.finish = 0, false, nil, ""
}

// handle takes one event's data. done is true at [DONE].
func (s *streamState) handle(data []byte, key string) (done bool, err error) {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return true, nil
	}
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, &upstreamError{failure: FailureBadResponse, detail: "stream event is not a JSON chunk"}
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		desc, _ := describeAPIError(data, key)
		return false, &upstreamError{failure: FailureServerError, detail: "error event in stream: " + desc}
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	if len(c.Choices) == 0 {
		return false, nil
	}
	ch := c.Choices[0]
	if ch.FinishReason != nil {
		s.finish = *ch.FinishReason
	}
	if nonEmptyString(ch.Delta.ReasoningContent) || nonEmptyString(ch.Delta.Reasoning) {
		s.alive = true
		s.tokens++
		if !s.started {
			if err := s.setProgress(generationProgress(s.tokens, s.maxTokens), stageThinking); err != nil {
				return false, err
			}
		}
	}
	if raw := ch.Delta.Content; len(raw) > 0 && string(raw) != "null" {
		text, err := s.joiner.Add(raw)
		if err != nil {
			return false, &upstreamError{failure: FailureBadResponse, detail: "content is not a JSON string"}
		}
		if nonEmptyString(raw) {
			s.alive = true
			s.tokens++
		}
		s.pending.WriteString(text)
	}
	return false, nil
}

// nonEmptyString reports whether raw is a JSON string other than "".
func nonEmptyString(raw json.RawMessage) bool {
	return len(raw) > 2 && raw[0] == '"'
}

// flush writes the pending text as one delta, then the progress it makes.
func (s *streamState) flush() error {
	if s.pending.Len() > 0 {
		text := s.pending.String()
		s.pending.Reset()
		if err := s.out.Delta(text); err != nil {
			return &outputError{err}
		}
		s.started = true
	}
	if !s.started {
		return nil
	}
	return s.setProgress(generationProgress(s.tokens, s.maxTokens), stageGenerating)
}

// complete ends a stream that reached [DONE]: the rest of the text, the
// token usage if the server sent it, and progress 100.
func (s *streamState) complete() error {
	s.pending.WriteString(s.joiner.Flush())
	if err := s.flush(); err != nil {
		return err
	}
	if u, ok := s.out.(UsageRecorder); ok && s.usage != nil {
		u.Usage(s.usage.PromptTokens, s.usage.CompletionTokens)
	}
	return s.setProgress(100, stageDone)
}

// fail returns err, first writing the text already received when the
// attempt fails upstream after its first token: the user keeps what the
// model said before it broke off.
func (s *streamState) fail(err error) error {
	var ue *upstreamError
	if s.started && errors.As(err, &ue) {
		s.pending.WriteString(s.joiner.Flush())
		if ferr := s.flush(); ferr != nil {
			return ferr
		}
	}
	return err
}

// setProgress reports p with stage when p is above the last value.
func (s *streamState) setProgress(p int, stage string) error {
	if p <= s.lastProgress {
		return nil
	}
	s.lastProgress = p
	if err := s.out.Progress(p, stage); err != nil {
		return &outputError{err}
	}
	return nil
}
