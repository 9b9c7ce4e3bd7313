package task

import (
	"context"
	"time"
)

// SubmitRequest is a user's submit of PROTOCOL.md section 4.
type SubmitRequest struct {
	UserID         string
	TaskID         string
	ConversationID string
	Content        string
	// Attachments are finished upload ids of the same user, part of the
	// submit's identity (PROTOCOL.md section 10).
	Attachments []string
	// ParentTaskID, when set, is the turn (task id) the new turn follows;
	// VersionOf, when set, a turn the new one is another version of (it
	// follows the same turn). At most one is set; with neither, the new turn
	// follows the newest turn of the conversation. They apply when the task
	// is created and are not part of the submit's identity (docs/protocol.md,
	// "Versions").
	ParentTaskID string
	VersionOf    string
	// Preamble is what a request of an API that apps already use carried
	// besides its content (PROTOCOL.md section 11); nil for a submit over
	// Tether's own protocol. It is part of the submit's identity: a repeat
	// of the task id is the same submit only with an equal preamble (nil
	// equals only nil).
	Preamble *Preamble
}

// SubmitResult says what a submit did.
type SubmitResult struct {
	Task Task
	// Created: a new task (and conversation, if new) was written.
	Created bool
	// Retried: an existing failed task became pending as a new attempt; the
	// caller publishes StatusEvent(Task) and dispatches it.
	Retried bool
}

// CancelResult says what a cancel did.
type CancelResult struct {
	Task Task
	// Cancelled: a pending task became cancelled here; the caller publishes
	// StatusEvent(Task).
	Cancelled bool
	// Requested: the task is running; the cancel was recorded and the runner
	// holding it must be told (it writes the cancelled status itself).
	Requested bool
}

// Page asks for a keyset page: the newest Limit rows before the opaque
// cursor Before ("" for the newest).
type Page struct {
	Before string
	Limit  int
}

// Store is what the gateway needs of the source of truth. Every method is
// scoped to the user: another user's ids behave exactly like missing ones.
type Store interface {
	Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error)
	// SubmitVersion is Submit of a turn the client places (ParentTaskID or
	// VersionOf set): a new version of a turn, or a message that follows a
	// turn other than the newest (docs/protocol.md, "Versions").
	SubmitVersion(ctx context.Context, req SubmitRequest) (SubmitResult, error)
	Get(ctx context.Context, userID, taskID string) (Task, error)
	Cancel(ctx context.Context, userID, taskID string) (CancelResult, error)
	// History returns messages oldest first and the cursor of the page
	// before them ("" when there is none).
	History(ctx context.Context, userID, conversationID string, p Page) ([]Message, string, error)
	// Conversations returns the user's conversations, newest activity first.
	Conversations(ctx context.Context, userID string, p Page) ([]Conversation, string, error)
	// Result returns a stored result named by a task's result_ref.
	Result(ctx context.Context, userID, ref string) (Result, error)
	// DeleteConversation removes the user's conversation with its messages
	// and tasks; its uploads are discarded (they expire at once, and the
	// upload sweep removes them with their bytes).
	DeleteConversation(ctx context.Context, userID, conversationID string) error
	// RenameConversation sets a conversation's title and returns it.
	RenameConversation(ctx context.Context, userID, conversationID, title string) (Conversation, error)
	// SearchConversations returns the user's conversations whose title or
	// messages match query, paged like Conversations.
	SearchConversations(ctx context.Context, userID, query string, p Page) ([]Conversation, string, error)
}

// Claim asks to run a task.
type Claim struct {
	TaskID   string
	RunnerID string
	// LastSeq is the seq of the last event of the claimed attempt found in
	// the log (0 if none), so numbering never reuses a logged seq.
	LastSeq int64
}

// Snapshot appends a batch of events of the current attempt to the stored
// task. It applies only if the stored seq equals FromSeq.
type Snapshot struct {
	TaskID    string
	Attempt   int
	FromSeq   int64
	Seq       int64
	Append    string // the text of the batch's deltas, in order
	Progress  int
	StreamPos uint64
}

// Finish ends the current attempt: it applies the last batch (as Snapshot)
// and moves the task to Status (done, failed or cancelled), whose status
// event has seq Seq. It fills the assistant message in the same transaction.
type Finish struct {
	Snapshot
	Status    Status
	Error     *string
	ResultRef *string
}

// RunnerStore is what a runner needs: the writes of the task it holds, all
// fenced by the attempt number.
type RunnerStore interface {
	// Claim makes a pending task running for this runner with a fresh
	// lease. The returned task's Seq is the seq of the running status event
	// the runner publishes next; its Output is the prefix the attempt kept
	// (Keep bytes), which the engine continues. A running task whose lease
	// expired is not claimable: maintenance hands it over first, folding the
	// log into the snapshot.
	Claim(ctx context.Context, c Claim) (Task, error)
	// Restart starts the runner's attempt over as a new pending attempt with
	// no kept output (its engine cannot continue the kept prefix); the
	// returned task's status event is the new attempt's first.
	Restart(ctx context.Context, taskID string, attempt int) (Task, error)
	// Heartbeat extends the lease; it reports whether a cancel was requested.
	Heartbeat(ctx context.Context, taskID string, attempt int) (cancelRequested bool, err error)
	SaveSnapshot(ctx context.Context, s Snapshot) error
	Finish(ctx context.Context, f Finish) (Task, error)
	// Context returns the messages of the task's conversation before the
	// task's own user message, oldest first: the newest limit of them.
	Context(ctx context.Context, taskID string, limit int) ([]Message, error)
	// Attachments returns the attachments of the task's own message and of
	// the newest limit messages before it, oldest first. The text of text
	// files is loaded newest first while the total stays within textBudget
	// bytes (TextLoaded says which).
	Attachments(ctx context.Context, taskID string, limit, textBudget int) ([]AttachmentFile, error)
}

// Fold advances a stored snapshot with the events the log holds after it;
// maintenance calls it before it takes a task from a dead runner.
type Fold func(ctx context.Context, t Task) (Task, error)

// Maintainer is the background upkeep of section 3. Each method changes what
// is due as of the store's clock and returns the tasks it changed, whose new
// status event (StatusEvent) the caller publishes.
type Maintainer interface {
	// ExpirePending fails tasks pending longer than the pending timeout (no_runner).
	ExpirePending(ctx context.Context) ([]Task, error)
	// ExpireLeases hands running tasks whose lease expired to a new attempt
	// (pending), fails them with runner_lost after the last attempt, or
	// finishes them as cancelled when a cancel was requested.
	ExpireLeases(ctx context.Context, fold Fold) ([]Task, error)
	// Purge deletes finished tasks older than the idempotency TTL; their
	// messages stay.
	Purge(ctx context.Context) (int64, error)
	// Undispatched picks tasks pending for longer than age to dispatch
	// again, each at most once per every across all processes.
	Undispatched(ctx context.Context, age, every time.Duration) ([]Task, error)
	// PurgeLogs calls purge for each task finished more than grace ago
	// whose events are still in the log, and records those purged.
	PurgeLogs(ctx context.Context, grace time.Duration, purge func(ctx context.Context, taskID string) error) (int, error)
}
