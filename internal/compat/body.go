package compat

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// maxBodyBytes bounds a request body: a 32 KiB message with up to 200
// earlier items of context.
const maxBodyBytes = 1 << 20

// bodyTimeout bounds reading a request's body, so a client that sends it
// slowly cannot hold a handler; a stream that follows has no read deadline.
const bodyTimeout = 30 * time.Second

// decodeBody reads a JSON object into v. A field of the wrong JSON type is
// a 400 that names it; unknown fields are ignored, as the OpenAI APIs add
// fields often and clients send them.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return task.Errorf(task.CodeTooLarge, "request body over %d bytes", maxBodyBytes)
		}
		return task.Errorf(task.CodeInvalid, "unreadable body")
	}
	return decodeJSON(body, v)
}

func decodeJSON(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return task.Errorf(task.CodeInvalid, "the body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return badParam(typeErr.Field, "%s must be a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
		}
		return task.Errorf(task.CodeInvalid, "the body is not valid JSON")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch {
	case goKind == "string":
		return "string"
	case goKind == "bool":
		return "boolean"
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "float"):
		return "number"
	case goKind == "slice":
		return "array"
	}
	return "object"
}

// present reports whether a raw field was sent with a value (JSON null
// counts as absent).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// textParts reads a message's content: a string, or a list of text parts
// whose types are in textTypes. Any other part is refused by name.
func textParts(param string, raw json.RawMessage, textTypes ...string) (string, error) {
	if !present(raw) {
		return "", badParam(param, "%s is required", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, validateText(param, s)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badParam(param, "%s must be a string or a list of content parts", param)
	}
	var b strings.Builder
	for i, p := range parts {
		var part struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		pp := param + "[" + itoa(i) + "]"
		if err := json.Unmarshal(p, &part); err != nil {
			return "", badParam(pp, "%s must be a content part object", pp)
		}
		ok := false
		for _, t := range textTypes {
			ok = ok || part.Type == t
		}
		if !ok {
			return "", badParam(pp+".type", "content part type %q is not supported here; only text is (%s)", part.Type, strings.Join(textTypes, ", "))
		}
		if part.Text == nil {
			return "", badParam(pp+".text", "a %s part needs text", part.Type)
		}
		b.WriteString(*part.Text)
	}
	return b.String(), validateText(param, b.String())
}

func itoa(i int) string { return strconv.Itoa(i) }
