// Package task is Tether's domain: tasks, their closed state machine, the
// events a running task emits, messages and conversations, and the error
// codes every layer speaks. It depends on the standard library only; every
// other package points at it.
package task

import (
	"time"
)

// Status is the state of a task. The values are stored in Postgres, where a
// CHECK constraint lists exactly these strings, and sent on the wire.
type Status string

const (
	// StatusPending: created (or retried) and waiting for a runner to claim it.
	StatusPending Status = "pending"
	// StatusRunning: claimed by a runner that holds a lease on the current attempt.
	StatusRunning Status = "running"
	// StatusDone: the engine finished; the output is complete.
	StatusDone Status = "done"
	// StatusFailed: the engine failed, no runner took the task in time, or
	// runners kept dying. A submit of the same id starts a new attempt.
	StatusFailed Status = "failed"
	// StatusCancelled: a user cancelled it. Terminal.
	StatusCancelled Status = "cancelled"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusPending, StatusRunning, StatusDone, StatusFailed, StatusCancelled}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusDone, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Terminal reports whether no further event of the current attempt can follow.
func (s Status) Terminal() bool {
	return s == StatusDone || s == StatusFailed || s == StatusCancelled
}

// Active reports whether the task still has work ahead (pending or running).
func (s Status) Active() bool { return s == StatusPending || s == StatusRunning }

// transitions is the state machine of PROTOCOL.md section 3. Nothing else
// decides which moves are allowed.
var transitions = map[Status][]Status{
	StatusPending: {StatusRunning, StatusCancelled, StatusFailed},
	// running -> pending is the hand-over to a new attempt after a lost lease.
	StatusRunning: {StatusDone, StatusFailed, StatusCancelled, StatusPending},
	// failed -> pending is a submit of the same id: a new attempt.
	StatusFailed: {StatusPending},
}

// CanTransition reports whether the state machine allows from -> to.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Reasons recorded with transitions, and errors set on failed tasks.
const (
	ReasonSubmitted    = "submitted"
	ReasonRetried      = "retried"
	ReasonClaimed      = "claimed"
	ReasonFinished     = "finished"
	ReasonEngineFailed = "engine_failed"
	ReasonCancelled    = "cancelled"
	ReasonLeaseExpired = "lease_expired"
	ReasonReleased     = "released"
	// ReasonRestarted: the runner's engine could not continue a kept prefix,
	// so the answer starts over as a new attempt.
	ReasonRestarted = "restarted"

	// ErrNoRunner is the task error when no runner claimed it within the pending timeout.
	ErrNoRunner = "no_runner"
	// ErrRunnerLost is the task error when runners died on every allowed attempt.
	ErrRunnerLost = "runner_lost"
)

// Limits of PROTOCOL.md.
const (
	MaxContentBytes = 32768
	MaxUserIDBytes  = 128
	DefaultLimit    = 50
	MaxLimit        = 200
)

// Task is one user submission and the assistant work it starts. The exported
// JSON fields are exactly the Task object of PROTOCOL.md section 2; the rest is
// server-side bookkeeping.
type Task struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	Status         Status    `json:"status"`
	Attempt        int       `json:"attempt"`
	Seq            int64     `json:"seq"`
	Progress       int       `json:"progress"`
	Input          string    `json:"input"`
	Output         string    `json:"output"`
	Error          *string   `json:"error"`
	ResultRef      *string   `json:"result_ref"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`

	UserID string `json:"-"`
	// RunnerID and LeaseUntil name the runner holding the current attempt.
	RunnerID   string    `json:"-"`
	LeaseUntil time.Time `json:"-"`
	// StreamPos is the JetStream stream sequence of the log message that
	// holds the event at Seq (one event, or a pack of deltas), so a
	// subscriber can read the events after the snapshot from the log: it
	// reads from that message on and drops what is at or before Seq.
	StreamPos uint64 `json:"-"`
	// Keep is how many bytes of Output the current attempt kept from the
	// attempt before it (a lost runner's answer is continued, not
	// restarted); its pending and running status events carry it.
	Keep int `json:"-"`
	// CancelRequested is set when a user cancelled while a runner held the
	// task; the runner writes the cancelled status itself.
	CancelRequested bool      `json:"-"`
	FinishedAt      time.Time `json:"-"`
	// Preamble is the context its submit carried besides its content (nil
	// for a task made over Tether's own protocol). It is not part of the
	// wire Task object: the endpoints of PROTOCOL.md section 11 echo what
	// they need of it in their own shapes.
	Preamble *Preamble `json:"-"`
}

// Message is one entry of a conversation.
type Message struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	Role           Role      `json:"role"`
	Content        string    `json:"content"`
	TaskID         *string   `json:"task_id"`
	Status         *string   `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
	// Attachments are the uploads a user message carries, in the order the
	// submit named them (PROTOCOL.md section 10); empty for the others.
	Attachments []Attachment `json:"attachments"`
	// ParentTaskID is the turn (task id) this message's turn follows; nil
	// for a conversation's first turn. Turns that follow the same turn are
	// versions of one another (docs/protocol.md, "Versions").
	ParentTaskID *string `json:"parent_task_id"`
}

// Role says who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message statuses of an assistant message.
const (
	MessageGenerating = "generating"
)

// Conversation is an ordered list of messages that holds many tasks.
type Conversation struct {
	ID           string    `json:"id"`
	Title        string    `json:"title"`
	UpdatedAt    time.Time `json:"updated_at"`
	ActiveTaskID *string   `json:"active_task_id"`
	// Snippet is a few words of the newest message a search matched (search
	// results only; "" elsewhere, and then left out of the JSON).
	Snippet string `json:"snippet,omitempty"`
}

// Result is an output too large to keep in its task (result_ref).
type Result struct {
	Ref     string `json:"ref"`
	TaskID  string `json:"task_id"`
	Content string `json:"content"`
}
