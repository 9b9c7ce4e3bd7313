package postgres_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/task"
)

func TestSubmitCreatesTaskMessagesAndConversation(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	taskID, convID := newID(), newID()

	res := submit(t, s, "alice", taskID, convID, "  what is\n a lease? ")
	if !res.Created || res.Retried {
		t.Fatalf("created %v retried %v, want a new task", res.Created, res.Retried)
	}
	now := stored(clk.Now())
	got := res.Task
	want := task.Task{ID: taskID, ConversationID: convID, Status: task.StatusPending, Attempt: 1,
		Input: "  what is\n a lease? ", CreatedAt: now, UpdatedAt: now, UserID: "alice"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("task\n got %+v\nwant %+v", got, want)
	}
	// What Submit returns is exactly what a read returns.
	read, err := s.Get(ctx, "alice", taskID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(read, got) {
		t.Fatalf("get\n got %+v\nwant %+v", read, got)
	}

	msgs, next, err := s.History(ctx, "alice", convID, task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if next != "" || len(msgs) != 2 {
		t.Fatalf("history: %d messages, next %q; want 2 and none", len(msgs), next)
	}
	user, asst := msgs[0], msgs[1]
	if user.Role != task.RoleUser || user.Content != want.Input || user.Status != nil ||
		*user.TaskID != taskID || !user.CreatedAt.Equal(now) {
		t.Errorf("user message %+v", user)
	}
	if asst.Role != task.RoleAssistant || asst.Content != "" || *asst.Status != task.MessageGenerating ||
		*asst.TaskID != taskID || !asst.CreatedAt.Equal(now) {
		t.Errorf("assistant placeholder %+v", asst)
	}

	convs, _, err := s.Conversations(ctx, "alice", task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 || convs[0].ID != convID || convs[0].Title != "what is a lease?" ||
		!convs[0].UpdatedAt.Equal(now) || convs[0].ActiveTaskID == nil || *convs[0].ActiveTaskID != taskID {
		t.Fatalf("conversations %+v", convs)
	}
	if tr := transitions(t, s, taskID); !reflect.DeepEqual(tr, []string{">pending:submitted"}) {
		t.Fatalf("transitions %v", tr)
	}
}

func TestSubmitSecondTaskBumpsConversation(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	convID := newID()
	submit(t, s, "alice", newID(), convID, "first question")
	clk.Advance(1e9)
	submit(t, s, "alice", newID(), convID, "second question")
	convs, _, err := s.Conversations(context.Background(), "alice", task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 || convs[0].Title != "first question" || !convs[0].UpdatedAt.Equal(stored(clk.Now())) {
		t.Fatalf("conversations %+v", convs)
	}
}

func TestSubmitTitleIsCutOnARuneBoundary(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	content := strings.Repeat("é日", 100)
	submit(t, s, "alice", newID(), newID(), content)
	convs, _, err := s.Conversations(context.Background(), "alice", task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	title := convs[0].Title
	if n := len([]rune(title)); n > task.TitleRunes || n < task.TitleRunes-2 {
		t.Fatalf("title has %d runes: %q", n, title)
	}
	if !strings.HasPrefix(content, strings.TrimSuffix(title, "…")) {
		t.Fatalf("title %q is not a prefix of the content", title)
	}
}

func TestSubmitRepeatReturnsTheTaskAsItStands(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()

	// One task in each status but failed.
	pending := newTask(t, s, "alice")
	running := claim(t, s, newTask(t, s, "alice").ID)
	done := claim(t, s, newTask(t, s, "alice").ID)
	done, err := s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
		TaskID: done.ID, Attempt: 1, FromSeq: done.Seq, Seq: done.Seq + 2, Append: "answer", Progress: 100}})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := s.Cancel(ctx, "alice", newTask(t, s, "alice").ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, before := range []task.Task{pending, running, done, cancelled.Task} {
		t.Run(string(before.Status), func(t *testing.T) {
			rows := rowCounts(t, s)
			res := submit(t, s, "alice", before.ID, before.ConversationID, before.Input)
			if res.Created || res.Retried {
				t.Fatalf("created %v retried %v, want a lookup", res.Created, res.Retried)
			}
			if !reflect.DeepEqual(res.Task, before) {
				t.Fatalf("task\n got %+v\nwant %+v", res.Task, before)
			}
			if after := rowCounts(t, s); after != rows {
				t.Fatalf("rows %v, were %v: a repeated submit wrote", after, rows)
			}
		})
	}
}

// failTask runs a task to failed with some output.
func failTask(t testing.TB, s *postgres.Store, user string) task.Task {
	t.Helper()
	r := claim(t, s, newTask(t, s, user).ID)
	failed, err := s.Finish(context.Background(), task.Finish{Status: task.StatusFailed,
		Error: ptr("demo failure"), Snapshot: task.Snapshot{TaskID: r.ID, Attempt: r.Attempt,
			FromSeq: r.Seq, Seq: r.Seq + 3, Append: "partial", Progress: 40, StreamPos: 9}})
	if err != nil {
		t.Fatal(err)
	}
	return failed
}

func TestSubmitOfAFailedTaskStartsANewAttempt(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	failed := failTask(t, s, "alice")
	if failed.Output != "partial" || *failed.Error != "demo failure" || failed.FinishedAt.IsZero() {
		t.Fatalf("failed task %+v", failed)
	}
	clk.Advance(5e9)

	res := submit(t, s, "alice", failed.ID, failed.ConversationID, failed.Input)
	if res.Created || !res.Retried {
		t.Fatalf("created %v retried %v, want a retry", res.Created, res.Retried)
	}
	got := res.Task
	if got.Status != task.StatusPending || got.Attempt != 2 || got.Seq != failed.Seq+1 ||
		got.Output != "" || got.Progress != 0 || got.Error != nil || got.ResultRef != nil ||
		!got.FinishedAt.IsZero() || got.RunnerID != "" || !got.UpdatedAt.Equal(stored(clk.Now())) {
		t.Fatalf("retried task %+v", got)
	}
	if c, st := placeholder(t, s, got.ID); c != "" || st != task.MessageGenerating {
		t.Fatalf("placeholder %q %q, want empty and generating", c, st)
	}
	wantTr := []string{">pending:submitted", "pending>running:claimed", "running>failed:engine_failed",
		"failed>pending:retried"}
	if tr := transitions(t, s, got.ID); !reflect.DeepEqual(tr, wantTr) {
		t.Fatalf("transitions %v, want %v", tr, wantTr)
	}
	// The retried task is pending now: a repeat is a lookup again.
	again := submit(t, s, "alice", failed.ID, failed.ConversationID, failed.Input)
	if again.Created || again.Retried || !reflect.DeepEqual(again.Task, got) {
		t.Fatalf("repeat of the retry: %+v", again)
	}
	// And the new attempt runs: claim continues the seq.
	if r := claim(t, s, got.ID); r.Attempt != 2 || r.Seq != got.Seq+1 {
		t.Fatalf("claim of attempt 2: %+v", r)
	}
	if n := count(t, s, `SELECT count(*) FROM messages`); n != 2 {
		t.Fatalf("%d messages, want 2: a retry writes no new message", n)
	}
}

func TestSubmitConflictsRevealNothing(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	mine := newTask(t, s, "alice")
	failed := failTask(t, s, "alice")
	otherConv := newTask(t, s, "alice").ConversationID

	cases := []struct {
		name string
		req  task.SubmitRequest
	}{
		{"other content", task.SubmitRequest{UserID: "alice", TaskID: mine.ID,
			ConversationID: mine.ConversationID, Content: "something else"}},
		{"other conversation", task.SubmitRequest{UserID: "alice", TaskID: mine.ID,
			ConversationID: otherConv, Content: mine.Input}},
		{"new conversation", task.SubmitRequest{UserID: "alice", TaskID: mine.ID,
			ConversationID: newID(), Content: mine.Input}},
		{"failed, other content", task.SubmitRequest{UserID: "alice", TaskID: failed.ID,
			ConversationID: failed.ConversationID, Content: "something else"}},
		{"failed, other conversation", task.SubmitRequest{UserID: "alice", TaskID: failed.ID,
			ConversationID: otherConv, Content: failed.Input}},
		{"another user's task, same everything", task.SubmitRequest{UserID: "mallory", TaskID: mine.ID,
			ConversationID: mine.ConversationID, Content: mine.Input}},
		{"another user's task, own new conversation", task.SubmitRequest{UserID: "mallory", TaskID: mine.ID,
			ConversationID: newID(), Content: mine.Input}},
		{"another user's failed task", task.SubmitRequest{UserID: "mallory", TaskID: failed.ID,
			ConversationID: newID(), Content: failed.Input}},
		{"another user's conversation, new task", task.SubmitRequest{UserID: "mallory", TaskID: newID(),
			ConversationID: mine.ConversationID, Content: "hi"}},
	}
	var message string
	for _, tc := range cases {
		rows := rowCounts(t, s)
		_, err := s.Submit(ctx, tc.req)
		wantCode(t, err, task.CodeConflict)
		if message == "" {
			message = task.ErrorMessage(err)
		}
		if task.ErrorMessage(err) != message {
			t.Errorf("%s: message %q differs from %q", tc.name, task.ErrorMessage(err), message)
		}
		if after := rowCounts(t, s); after != rows {
			t.Errorf("%s: rows %v, were %v", tc.name, after, rows)
		}
	}
	if got, _ := s.Get(ctx, "alice", failed.ID); got.Status != task.StatusFailed || got.Attempt != 1 {
		t.Fatalf("a conflicting submit changed the failed task: %+v", got)
	}
}

func TestSubmitAcceptsUpperCaseIDs(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	first := newTask(t, s, "alice")
	res := submit(t, s, "alice", strings.ToUpper(first.ID), strings.ToUpper(first.ConversationID), first.Input)
	if res.Created || res.Task.ID != first.ID {
		t.Fatalf("upper-case repeat: %+v", res)
	}
}

func TestSubmitConcurrentOneIDCreatesOneTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		preamble func() *task.Preamble
	}{
		{"plain", func() *task.Preamble { return nil }},
		// Each submit has its own, equal preamble, as each request decodes its own.
		{"with a preamble", samplePreamble},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// More connections than the default, so the submits really race in Postgres.
			s, err := postgres.Open(context.Background(), pgtest.URL(t)+"&pool_max_conns=16", postgres.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()

			const n = 200
			taskID, convID := newID(), newID()
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				results = make([]task.SubmitResult, n)
				errs    = make([]error, n)
			)
			for i := range n {
				p := tc.preamble()
				wg.Go(func() {
					<-start
					results[i], errs[i] = s.Submit(context.Background(), task.SubmitRequest{
						UserID: "alice", TaskID: taskID, ConversationID: convID, Content: "once", Preamble: p})
				})
			}
			close(start)
			wg.Wait()

			created := 0
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("submit %d: %v", i, errs[i])
				}
				if results[i].Created {
					created++
				}
				if results[i].Task.ID != taskID || results[i].Retried ||
					!reflect.DeepEqual(results[i].Task.Preamble, tc.preamble()) {
					t.Fatalf("submit %d: %+v", i, results[i])
				}
			}
			if created != 1 {
				t.Fatalf("%d submits created, want exactly 1", created)
			}
			if rows := rowCounts(t, s); rows != [4]int{1, 2, 1, 1} {
				t.Fatalf("conversations, messages, tasks, transitions = %v, want [1 2 1 1]", rows)
			}
		})
	}
}

// TestTaskConversationBelongsToItsUser: the schema refuses a task in
// another user's conversation, whatever wrote it (the one-statement submit
// relies on it when such a conversation appears concurrently).
func TestTaskConversationBelongsToItsUser(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	theirs := newTask(t, s, "bob")
	_, err := s.Pool().Exec(context.Background(), `
		INSERT INTO tasks (id, user_id, conversation_id, assistant_message_id, status, attempt,
			submit_attempt, seq, progress, input, output, created_at, updated_at)
		VALUES ($1, 'alice', $2, $3, 'pending', 1, 1, 0, 0, 'x', '', now(), now())`,
		newID(), theirs.ConversationID, newID())
	if err == nil || !strings.Contains(err.Error(), "tasks_conversation_owner") {
		t.Fatalf("a task in another user's conversation: %v", err)
	}
	// Through the store: refused, and nothing of alice's is written.
	before := rowCounts(t, s)
	_, err = s.Submit(context.Background(), task.SubmitRequest{UserID: "alice", TaskID: newID(),
		ConversationID: theirs.ConversationID, Content: "hi"})
	wantCode(t, err, task.CodeConflict)
	if after := rowCounts(t, s); after != before {
		t.Fatalf("rows %v -> %v", before, after)
	}
}
