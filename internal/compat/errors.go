package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// paramError is a request error about one field, named in the OpenAI
// error's "param" (PROTOCOL.md section 11: a part these endpoints do not
// support is refused by name, never dropped).
type paramError struct {
	param string
	err   *task.Error
}

func (e *paramError) Error() string { return e.param + ": " + e.err.Error() }
func (e *paramError) Unwrap() error { return e.err }

// badParam is a 400 invalid about one field.
func badParam(param, format string, args ...any) error {
	return &paramError{param: param, err: task.Errorf(task.CodeInvalid, format, args...)}
}

// openAIError is the error body of the OpenAI APIs, with Tether's code.
type openAIError struct {
	Message string    `json:"message"`
	Type    string    `json:"type"`
	Param   *string   `json:"param"`
	Code    task.Code `json:"code"`
}

// errorType is the OpenAI error type of a status.
func errorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	if status >= 500 {
		return "server_error"
	}
	return "invalid_request_error"
}

// errorBody is the OpenAI-shaped error of err.
func errorBody(err error) (int, openAIError) {
	code := task.ErrorCode(err)
	status := protocol.HTTPStatus(code)
	e := openAIError{Message: task.ErrorMessage(err), Type: errorType(status), Code: code}
	var pe *paramError
	if errors.As(err, &pe) {
		e.Param = &pe.param
	}
	return status, e
}

// writeError answers err in the OpenAI shape; an unavailable answer says
// when to try again.
func writeError(w http.ResponseWriter, err error) {
	status, body := errorBody(err)
	protocol.SetRetryAfter(w.Header(), body.Code)
	writeJSON(w, status, struct {
		Error openAIError `json:"error"`
	}{body})
}

func writeStatusError(w http.ResponseWriter, status int, code task.Code, message, param string) {
	e := openAIError{Message: message, Type: errorType(status), Code: code}
	if param != "" {
		e.Param = &param
	}
	writeJSON(w, status, struct {
		Error openAIError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":{"message":"internal error","type":"server_error","param":null,"code":%q}}`, task.CodeInternal))
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
