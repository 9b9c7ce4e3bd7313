package postgres

import (
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/task"
)

// Input is checked before the database is touched, so a refused request
// writes nothing and a malformed id never reaches a query.

// parseID checks that s is a UUID in the canonical 36-character form and
// returns it lower-cased, as Postgres prints it, so ids compare equal
// whatever case a client used.
func parseID(what, s string) (string, error) {
	if len(s) != 36 {
		return "", task.Errorf(task.CodeInvalid, "%s must be a UUID", what)
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return "", task.Errorf(task.CodeInvalid, "%s must be a UUID", what)
	}
	return id.String(), nil
}

// checkUser checks a user id: 1..128 bytes of text.
func checkUser(userID string) error {
	if userID == "" || len(userID) > task.MaxUserIDBytes {
		return task.Errorf(task.CodeInvalid, "user id must be 1..%d bytes", task.MaxUserIDBytes)
	}
	if !isText(userID) {
		return task.Errorf(task.CodeInvalid, "user id must be UTF-8 text")
	}
	return nil
}

// checkContent checks a submitted message: 1..MaxContentBytes bytes of text,
// or none at all when it carries files (attachments is how many): a message
// may be its files alone.
func checkContent(content string, attachments int) error {
	if content == "" && attachments == 0 {
		return task.Errorf(task.CodeInvalid, "content is empty")
	}
	if len(content) > task.MaxContentBytes {
		return task.Errorf(task.CodeTooLarge, "content is over %d bytes", task.MaxContentBytes)
	}
	if !isText(content) {
		return task.Errorf(task.CodeInvalid, "content must be UTF-8 text")
	}
	return nil
}

// isText reports whether s is valid UTF-8 that Postgres text can hold (no NUL).
func isText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// limit resolves a page size: 0 means the default, otherwise 1..MaxLimit.
func limit(n int) (int, error) {
	if n == 0 {
		return task.DefaultLimit, nil
	}
	if n < 1 || n > task.MaxLimit {
		return 0, task.Errorf(task.CodeInvalid, "limit must be 1..%d", task.MaxLimit)
	}
	return n, nil
}

// title is a new conversation's title: a short, clean one made from its
// first message (task.Title).
func title(content string) string { return task.Title(content) }
