package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// The task errors of the OpenAI engine (docs/engines.md has the table).
// They are shown to users, so they name what went wrong in the user's terms
// and carry no upstream detail; the detail goes to the log.
const (
	FailureKeyRejected   = "model server rejected the API key"
	FailureModelNotFound = "model not found"
	FailureRateLimit     = "model server rate limit"
	FailureTimeout       = "model server timed out"
	FailureStreamEnded   = "model stream ended early"
	FailureServerError   = "model server error"
	FailureUnreachable   = "model server unreachable"
	FailureBadResponse   = "model server sent an unreadable response"
)

// failureForStatus maps an HTTP error status of the chat completions call
// to a task error.
func failureForStatus(code int) string {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return FailureKeyRejected
	case code == http.StatusNotFound:
		return FailureModelNotFound
	case code == http.StatusTooManyRequests:
		return FailureRateLimit
	case code == http.StatusRequestTimeout || code == http.StatusGatewayTimeout:
		return FailureTimeout
	case code >= 500:
		return fmt.Sprintf("%s (HTTP %d)", FailureServerError, code)
	default:
		return fmt.Sprintf("model server rejected the request (HTTP %d)", code)
	}
}

// retryableStatus: the server may answer differently in a moment.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// upstreamError is one failed request: the task error it becomes, whether
// another request may succeed, and detail for the log only.
type upstreamError struct {
	failure   string
	retryable bool
	detail    string
	// status is the HTTP error status the server answered with, 0 when the
	// failure was not one (a connection, a stream, a timeout). A 400 or 422
	// to a continuation is a refusal of the prefill (refusedPrefill).
	status int
}

func (e *upstreamError) Error() string { return e.failure + ": " + e.detail }

// outputError wraps an error of the runner's Output, which ends the run as
// it is: it is neither retried nor turned into a Failure.
type outputError struct{ err error }

func (e *outputError) Error() string { return e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// Sentinel causes of the engine's own deadlines.
var (
	errRequestTimeout    = errors.New("request timeout")
	errFirstTokenTimeout = errors.New("first token timeout")
)

// maxErrorDetail bounds how much of an upstream message reaches the log.
const maxErrorDetail = 300

// apiErrorBody is the error shape OpenAI, vLLM, Ollama and LiteLLM use,
// both as an HTTP error body and as an event inside a stream. Some servers
// send "error" as a plain string instead.
type apiErrorBody struct {
	Error json.RawMessage `json:"error"`
}

// describeAPIError summarises an upstream error for the log: its type, code
// and message, cut short, with the key removed should the server echo it.
// ok is false when body holds no error object.
func describeAPIError(body []byte, key string) (desc string, ok bool) {
	var b apiErrorBody
	if json.Unmarshal(body, &b) != nil || len(b.Error) == 0 || string(b.Error) == "null" {
		return "", false
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	var s string
	switch {
	case json.Unmarshal(b.Error, &obj) == nil:
		s = fmt.Sprintf("type=%q code=%q message=%q", redact(obj.Type, key),
			redact(fmt.Sprint(obj.Code), key), redact(obj.Message, key))
	case json.Unmarshal(b.Error, &s) == nil:
		s = fmt.Sprintf("message=%q", redact(s, key))
	default:
		return "", false
	}
	return s, true
}

// redact removes key from s and bounds s's length.
func redact(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	if len(s) > maxErrorDetail {
		cut := maxErrorDetail
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
