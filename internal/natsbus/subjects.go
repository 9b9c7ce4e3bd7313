// Package natsbus is Tether's use of NATS and JetStream: the task event log
// and live feed, the dispatch work queue, cancel requests to runners and the
// per-user "task" feed, plus the embedded server the gateway starts by
// default. Every subject and stream name is in this file, so the whole
// namespace can be read (and secured in nats.conf) in one place.
package natsbus

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Streams and the consumer.
const (
	// TasksStream stores every event of every task on tether.task.<id>, the log
	// a subscriber reads to close the gap between a snapshot and live events.
	TasksStream = "TETHER_TASKS"
	// DispatchStream is the work queue of tasks waiting for a runner.
	DispatchStream = "TETHER_DISPATCH"
	// RunnersConsumer is the durable pull consumer all runners share, so each
	// dispatch goes to exactly one of them.
	RunnersConsumer = "runners"
)

// Subjects.
const (
	taskPrefix   = "tether.task."
	cancelPrefix = "tether.cancel."
	userPrefix   = "tether.user."

	// TasksSubjects is what TasksStream captures.
	TasksSubjects = taskPrefix + ">"
	// DispatchSubject carries {"task_id","attempt"} messages into DispatchStream.
	DispatchSubject = "tether.dispatch"
	// CancelsSubjects is what every runner listens on for cancel requests.
	CancelsSubjects = cancelPrefix + "*"
)

// TaskSubject is the subject of task id's events, in the log and live.
func TaskSubject(id string) string { return taskPrefix + id }

// CancelSubject is where a cancel request for task id goes.
func CancelSubject(id string) string { return cancelPrefix + id }

// UserSubject is the subject of a user's "task" events. User ids may hold
// dots, spaces or wildcards, which are not allowed in a subject token, so the
// token is a hash: the first 32 hex digits of SHA-256 of the id.
func UserSubject(userID string) string {
	sum := sha256.Sum256([]byte(userID))
	return userPrefix + hex.EncodeToString(sum[:])[:32]
}

// checkToken refuses an id that would change the meaning of a subject built
// from it: empty, or with a dot, a wildcard or white space. Task ids are
// UUIDs, so this only ever catches bugs.
func checkToken(id string) error {
	if id == "" || strings.ContainsAny(id, ".*> \t\r\n") {
		return fmt.Errorf("%q is not usable as a subject token", id)
	}
	return nil
}
