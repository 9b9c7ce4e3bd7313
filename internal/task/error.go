package task

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code of PROTOCOL.md section 4.
type Code string

const (
	CodeInvalid      Code = "invalid"
	CodeUnauthorized Code = "unauthorized"
	CodeForbidden    Code = "forbidden"
	CodeNotFound     Code = "not_found"
	CodeConflict     Code = "conflict"
	CodeRateLimited  Code = "rate_limited"
	CodeTooLarge     Code = "too_large"
	CodeUnavailable  Code = "unavailable"
	CodeInternal     Code = "internal"
)

// Error is an error meant for the user: a code for programs, a message for
// people. Err, when set, is the cause: it is logged (Error includes it) and
// can be matched with errors.Is, but never reaches a client.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return string(e.Code) + ": " + e.Message + ": " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Unavailable marks err as a dependency that is down (Postgres, NATS): the
// request may succeed when it is retried, and it is answered `unavailable`
// (HTTP 503), never `internal`. dependency names it for people ("database").
func Unavailable(dependency string, err error) *Error {
	return &Error{Code: CodeUnavailable, Message: dependency + " unavailable; try again shortly", Err: err}
}

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal for any other error (and "" for nil).
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the user-facing message: the *Error's own, or
// "internal error" so internal detail never reaches a client.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Runner-side sentinel errors of the store.
var (
	// ErrFenced: the caller's attempt is no longer the task's current running
	// attempt (a newer attempt, a cancel or a finish won). Nothing was written.
	ErrFenced = errors.New("attempt fenced out")
	// ErrNotClaimable: the task is not pending, nor running on an expired lease.
	ErrNotClaimable = errors.New("task not claimable")
	// ErrCancelRequested: a user asked to cancel; the runner must finish the
	// attempt as cancelled instead.
	ErrCancelRequested = errors.New("cancel requested")
	// ErrSeqMismatch: a snapshot does not continue from the stored seq.
	ErrSeqMismatch = errors.New("snapshot does not continue the stored seq")
	// ErrTooManyRetries: a user retried a failed task more often than the
	// store allows (the cause of a CodeConflict error).
	ErrTooManyRetries = errors.New("too many retries of one task")
)
