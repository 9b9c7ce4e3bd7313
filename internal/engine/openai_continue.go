package engine

import (
	"errors"
	"net/http"
)

// ContinueMode says how the OpenAI engine answers an Input with a Prefix:
// the answer of an attempt whose runner was lost, which the new attempt
// keeps (PROTOCOL.md section 3) and the model should carry on from.
type ContinueMode string

const (
	// ContinuePrefill sends the prefix as a trailing assistant message that
	// the model continues (assistant prefill). vLLM needs
	// continue_final_message and add_generation_prompt false for it, which
	// the request carries; llama.cpp's server and Ollama continue a trailing
	// assistant message on their own. A server that refuses such a request
	// (HTTP 400 or 422) makes the engine return ErrCannotContinue, and the
	// runner starts the answer over.
	ContinuePrefill ContinueMode = "prefill"
	// ContinueRestart never continues: a Prefix makes the engine return
	// ErrCannotContinue without a request. It is for servers that would
	// take a trailing assistant message as a finished turn and answer
	// afresh, which would glue a second answer to the kept one.
	ContinueRestart ContinueMode = "restart"
)

// prefillFields are the request fields of a continuation. They are vLLM's
// (and transformers'): continue_final_message leaves the last assistant
// message open instead of ending its turn, and add_generation_prompt must
// then be false, or vLLM refuses the request. Older llama.cpp servers
// ignore continue_final_message and choose the generation prompt
// themselves for a trailing assistant message (recent ones read both
// fields, as vLLM does); Ollama's decoder drops fields it does not know.
// OpenAI refuses an unknown field with HTTP 400, which is a refusal like
// any other: the answer starts over.
type prefillFields struct {
	ContinueFinalMessage bool  `json:"continue_final_message,omitempty"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt,omitempty"`
}

// prefill returns the fields of a request that continues prefix: none for
// a first attempt, so such requests stay what every server expects.
func prefill(prefix string) prefillFields {
	if prefix == "" {
		return prefillFields{}
	}
	no := false
	return prefillFields{ContinueFinalMessage: true, AddGenerationPrompt: &no}
}

// refusedPrefill reports whether err is a server's refusal of a request
// that asked it to continue: HTTP 400 (OpenAI, vLLM, llama.cpp, for
// example "Assistant response prefill is incompatible with
// enable_thinking") or 422 (servers that validate with FastAPI or
// Pydantic, TGI). Other failures are not about the prefix: a 5xx is
// retried, a 401 fails the task as it would without one.
func refusedPrefill(err error) (*upstreamError, bool) {
	var ue *upstreamError
	if !errors.As(err, &ue) {
		return nil, false
	}
	return ue, ue.status == http.StatusBadRequest || ue.status == http.StatusUnprocessableEntity
}
