package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// outcome is one submit's answer.
type outcome struct {
	res task.SubmitResult
	err error
}

// inOneBatch queues reqs while every batch slot is held, then lets them go
// together, and returns their answers in order.
func inOneBatch(t *testing.T, s *postgres.Store, reqs []task.SubmitRequest) []outcome {
	t.Helper()
	release := s.HoldBatches()
	out := make([]outcome, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			res, err := s.Submit(context.Background(), req)
			out[i] = outcome{res, err}
		})
	}
	eventually.True(t, "every submit queued", func() bool { return s.QueuedSubmits() == len(reqs) })
	release()
	wg.Wait()
	return out
}

func TestBatchOfOneIDCreatesOneTask(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	req := task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "once"}
	reqs := make([]task.SubmitRequest, 8)
	for i := range reqs {
		reqs[i] = req
	}
	created := 0
	for i, o := range inOneBatch(t, s, reqs) {
		if o.err != nil {
			t.Fatalf("submit %d: %v", i, o.err)
		}
		if o.res.Task.ID != req.TaskID {
			t.Fatalf("submit %d answered task %s", i, o.res.Task.ID)
		}
		if o.res.Created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d submits created the task, want 1", created)
	}
	if got := rowCounts(t, s); got != [4]int{1, 2, 1, 1} {
		t.Fatalf("rows (conversations, messages, tasks, transitions) = %v, want [1 2 1 1]", got)
	}
}

// A submit refused in a batch fails alone: the others are created.
func TestBatchAnswersEachSubmitByItsOwnRules(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	conv := newID()
	first := submit(t, s, "alice", newID(), conv, "one").Task

	var reqs []task.SubmitRequest
	for range 10 {
		reqs = append(reqs, task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "new"})
	}
	// The same id with other content, the same submit again, and a new task
	// of another user in alice's conversation.
	reqs = append(reqs,
		task.SubmitRequest{UserID: "alice", TaskID: first.ID, ConversationID: conv, Content: "two"},
		task.SubmitRequest{UserID: "alice", TaskID: first.ID, ConversationID: conv, Content: "one"},
		task.SubmitRequest{UserID: "bob", TaskID: newID(), ConversationID: conv, Content: "mine"})
	out := inOneBatch(t, s, reqs)
	for i, o := range out[:10] {
		if o.err != nil || !o.res.Created || o.res.Task.ID != reqs[i].TaskID {
			t.Fatalf("new submit %d: %+v, %v", i, o.res, o.err)
		}
		if _, err := s.Get(ctx, "alice", reqs[i].TaskID); err != nil {
			t.Fatalf("read created task %d: %v", i, err)
		}
	}
	wantCode(t, out[10].err, task.CodeConflict)
	if o := out[11]; o.err != nil || o.res.Created || o.res.Task.ID != first.ID {
		t.Fatalf("repeat: %+v, %v", o.res, o.err)
	}
	wantCode(t, out[12].err, task.CodeConflict)
	if got := rowCounts(t, s); got != [4]int{11, 22, 11, 11} {
		t.Fatalf("rows (conversations, messages, tasks, transitions) = %v, want [11 22 11 11]", got)
	}
}

// Two users submitting into one new conversation at once: it is one's,
// the other is refused, and the rest of the batch is created.
func TestBatchOfTwoUsersInOneNewConversation(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	conv := newID()
	out := inOneBatch(t, s, []task.SubmitRequest{
		{UserID: "alice", TaskID: newID(), ConversationID: conv, Content: "a"},
		{UserID: "bob", TaskID: newID(), ConversationID: conv, Content: "b"},
		{UserID: "carol", TaskID: newID(), ConversationID: newID(), Content: "c"},
	})
	winner, loser := out[0], out[1]
	owner := "alice"
	if winner.err != nil {
		winner, loser, owner = loser, winner, "bob"
	}
	if winner.err != nil || !winner.res.Created {
		t.Fatalf("neither was created: %v, %v", out[0].err, out[1].err)
	}
	wantCode(t, loser.err, task.CodeConflict)
	if out[2].err != nil || !out[2].res.Created {
		t.Fatalf("other conversation: %+v, %v", out[2].res, out[2].err)
	}
	if got := count(t, s, `SELECT count(*) FROM conversations WHERE id = $1 AND user_id = $2`, conv, owner); got != 1 {
		t.Fatalf("%s's conversation: %d rows", owner, got)
	}
	if got := rowCounts(t, s); got != [4]int{2, 4, 2, 2} {
		t.Fatalf("rows = %v, want [2 4 2 2]", got)
	}
}

// Another user's conversation appearing while a batch runs fails the
// batch's statement (the composite key tasks -> conversations): each of its
// submits is then decided alone, and only the one into that conversation
// is refused.
func TestBatchWithAnotherUsersConversationAppearingMeanwhile(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	conv := newID()
	other, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	var otherPID int
	if err := other.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&otherPID); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `INSERT INTO conversations (id, user_id, title, created_at, updated_at)
		VALUES ($1, 'bob', 'bob''s', now(), now())`, conv); err != nil {
		t.Fatal(err)
	}

	reqs := []task.SubmitRequest{{UserID: "alice", TaskID: newID(), ConversationID: conv, Content: "mine?"}}
	for range 5 {
		reqs = append(reqs, task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "new"})
	}
	release := s.HoldBatches()
	out := make([]outcome, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			res, err := s.Submit(ctx, req)
			out[i] = outcome{res, err}
		})
	}
	eventually.True(t, "every submit queued", func() bool { return s.QueuedSubmits() == len(reqs) })
	release()
	// The batch has inserted alice's task and waits on bob's uncommitted
	// conversation.
	eventually.True(t, "the batch waits for the other conversation", func() bool {
		return count(t, s, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, otherPID) == 1
	})
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	wantCode(t, out[0].err, task.CodeConflict)
	for i, o := range out[1:] {
		if o.err != nil || !o.res.Created {
			t.Fatalf("submit %d: %+v, %v", i+1, o.res, o.err)
		}
	}
	if got := rowCounts(t, s); got != [4]int{6, 10, 5, 5} {
		t.Fatalf("rows (conversations, messages, tasks, transitions) = %v, want [6 10 5 5]", got)
	}
}

// A submit that gives up while queued leaves the queue and writes nothing.
func TestBatchCallerThatGivesUpLeavesTheQueue(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	release := s.HoldBatches()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Submit(ctx, task.SubmitRequest{UserID: "alice", TaskID: newID(),
			ConversationID: newID(), Content: "late"})
		done <- err
	}()
	eventually.True(t, "the submit queued", func() bool { return s.QueuedSubmits() == 1 })
	cancel()
	if err := eventually.Receive(t, done, "the submit's answer"); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if n := s.QueuedSubmits(); n != 0 {
		t.Fatalf("%d submits still queued", n)
	}
	release()
	// The slots are free again: a submit runs.
	newTask(t, s, "alice")
	if got := rowCounts(t, s); got != [4]int{1, 2, 1, 1} {
		t.Fatalf("rows = %v, want only the later task's", got)
	}
}

// Close answers the submits still queued `unavailable`.
func TestBatchCloseFailsQueuedSubmits(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	release := s.HoldBatches()
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := s.Submit(context.Background(), task.SubmitRequest{UserID: "alice", TaskID: newID(),
			ConversationID: newID(), Content: "late"})
		done <- err
	}()
	eventually.True(t, "the submit queued", func() bool { return s.QueuedSubmits() == 1 })
	s.Close()
	wantCode(t, eventually.Receive(t, done, "the submit's answer"), task.CodeUnavailable)
	_, err := s.Submit(context.Background(), task.SubmitRequest{UserID: "alice", TaskID: newID(),
		ConversationID: newID(), Content: "after"})
	wantCode(t, err, task.CodeUnavailable)
}
