package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tether-dev/tether/internal/task"
)

// classify turns an error that means "Postgres cannot be reached right now"
// into task.Unavailable, once, at the store's boundary: every exported
// method defers it. The gateway then answers `unavailable` (503) instead of
// `internal`, and callers that retry (runners, maintenance) can tell an
// outage from a bug. Errors that already carry a code, and everything else,
// pass through unchanged.
func classify(errp *error) {
	if err := *errp; err != nil && task.ErrorCode(err) == task.CodeInternal && unreachable(err) {
		*errp = task.Unavailable("database", err)
	}
}

// unreachable reports whether err says the database is down, restarting,
// refusing connections or not answering in time, rather than that a
// statement was wrong:
//   - a connection that could not be made (refused, reset, DNS, TLS, a pool
//     acquire that gave up);
//   - SQLSTATE class 08 (connection exception), 57P01 admin_shutdown,
//     57P02 crash_shutdown, 57P03 cannot_connect_now (starting up), and class
//     53 (out of connections, memory or disk);
//   - a connection that broke or timed out mid-statement (EOF, reset, a
//     deadline while talking to the server, the caller's deadline);
//   - a statement the server ended for taking too long: 57014
//     query_canceled (statement_timeout) and 55P03 lock_not_available
//     (lock_timeout: a row or table another transaction holds). The
//     request may succeed when it is retried, so it is not a bug.
//
// A context cancelled by the caller (a client that hung up) is not an outage.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") ||
			c == "57P01" || c == "57P02" || c == "57P03" ||
			c == "57014" || c == "55P03"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr),
		errors.Is(err, pgconn.ErrConnClosed),
		pgconn.Timeout(err),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr):
		return true
	}
	return false
}
