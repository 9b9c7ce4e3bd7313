package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

func TestExpirePendingFailsWithNoRunner(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{PendingTimeout: time.Minute})
	ctx := context.Background()
	tk := newTask(t, s, "alice")
	running := claim(t, s, newTask(t, s, "alice").ID)

	clk.Advance(30 * time.Second)
	undispatched, err := s.Undispatched(ctx, 10*time.Second, 30*time.Second)
	if err != nil || len(undispatched) != 1 || undispatched[0].ID != tk.ID {
		t.Fatalf("undispatched: %v %v", undispatched, err)
	}
	if got, _ := s.Undispatched(ctx, time.Minute, 30*time.Second); len(got) != 0 {
		t.Fatalf("undispatched too early: %v", got)
	}
	clk.Advance(30 * time.Second) // exactly the timeout: not yet
	if got, err := s.ExpirePending(ctx); err != nil || len(got) != 0 {
		t.Fatalf("expired at the timeout: %v %v", got, err)
	}
	clk.Advance(time.Microsecond)
	got, err := s.ExpirePending(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("expire pending: %v %v", got, err)
	}
	failed := got[0]
	if failed.ID != tk.ID || failed.Status != task.StatusFailed || *failed.Error != task.ErrNoRunner ||
		failed.Seq != 1 || !failed.FinishedAt.Equal(stored(clk.Now())) {
		t.Fatalf("expired %+v", failed)
	}
	if c, st := placeholder(t, s, tk.ID); c != "" || st != "failed" {
		t.Fatalf("placeholder %q %q", c, st)
	}
	if tr := transitions(t, s, tk.ID); tr[len(tr)-1] != "pending>failed:no_runner" {
		t.Fatalf("transitions %v", tr)
	}
	if r, _ := s.Load(ctx, running.ID); r.Status != task.StatusRunning {
		t.Fatalf("a running task was expired as pending")
	}
	// A failed task is submitted again as a new attempt.
	if res := submit(t, s, "alice", tk.ID, tk.ConversationID, tk.Input); !res.Retried || res.Task.Seq != 2 {
		t.Fatalf("resubmit after no_runner: %+v", res)
	}
}

// TestExpirePendingConcurrently: maintenance in several processes at once
// changes each task once.
func TestExpirePendingConcurrently(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	for range 40 {
		newTask(t, s, "alice")
	}
	clk.Advance(time.Hour)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total = map[string]int{}
	)
	for range 4 {
		wg.Go(func() {
			got, err := s.ExpirePending(context.Background())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tk := range got {
				total[tk.ID]++
			}
		})
	}
	wg.Wait()
	if len(total) != 40 {
		t.Fatalf("%d tasks expired, want 40", len(total))
	}
	for id, n := range total {
		if n != 1 {
			t.Fatalf("task %s expired %d times", id, n)
		}
	}
}

// snapshot saves a batch and fails the test on error.
func snapshot(t testing.TB, s *postgres.Store, r task.Task, text string) task.Task {
	t.Helper()
	err := s.SaveSnapshot(context.Background(), task.Snapshot{TaskID: r.ID, Attempt: r.Attempt,
		FromSeq: r.Seq, Seq: r.Seq + 1, Append: text, Progress: 20})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// logFold is a fold over a fake log: it appends events after the snapshot.
func logFold(events ...task.Event) task.Fold {
	return func(_ context.Context, t task.Task) (task.Task, error) {
		base := t.Seq
		for _, e := range events {
			e.Seq += base
			e.Attempt = t.Attempt
			t.Apply(e)
		}
		return t, nil
	}
}

func TestExpireLeasesRetriesThenFailsWithRunnerLost(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second, MaxAttempts: 3})
	ctx := context.Background()
	tk := newTask(t, s, "alice")

	want := ""
	for attempt := 1; attempt <= 3; attempt++ {
		r := snapshot(t, s, claim(t, s, tk.ID), "partial")
		want += "partial more"
		if r.Attempt != attempt {
			t.Fatalf("claimed attempt %d, want %d", r.Attempt, attempt)
		}
		clk.Advance(10 * time.Second)
		if got, err := s.ExpireLeases(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("expired a live lease: %v %v", got, err)
		}
		clk.Advance(time.Second)
		// The log holds two events the snapshot has not seen.
		got, err := s.ExpireLeases(ctx, logFold(
			task.Event{Type: task.EventDelta, Seq: 1, Text: " more"},
			task.Event{Type: task.EventProgress, Seq: 2, Progress: 60}))
		if err != nil || len(got) != 1 {
			t.Fatalf("expire leases: %v %v", got, err)
		}
		next := got[0]
		if next.Seq != r.Seq+3 {
			t.Fatalf("seq %d after folding 2 events onto %d; want %d", next.Seq, r.Seq, r.Seq+3)
		}
		if attempt < 3 {
			// The new attempt keeps the lost one's answer and continues it.
			if next.Status != task.StatusPending || next.Attempt != attempt+1 || next.Output != want ||
				next.Keep != len(want) || next.Progress != 60 || next.RunnerID != "" {
				t.Fatalf("after lost attempt %d: %+v", attempt, next)
			}
			if c, st := placeholder(t, s, tk.ID); c != "" || st != "generating" {
				t.Fatalf("placeholder %q %q", c, st)
			}
			continue
		}
		if next.Status != task.StatusFailed || *next.Error != task.ErrRunnerLost ||
			next.Output != want || next.Progress != 60 || next.Attempt != 3 {
			t.Fatalf("after the last attempt: %+v", next)
		}
		if c, st := placeholder(t, s, tk.ID); c != want || st != "failed" {
			t.Fatalf("placeholder %q %q", c, st)
		}
	}
	wantTr := []string{">pending:submitted",
		"pending>running:claimed", "running>pending:lease_expired",
		"pending>running:claimed", "running>pending:lease_expired",
		"pending>running:claimed", "running>failed:runner_lost"}
	if tr := transitions(t, s, tk.ID); !reflect.DeepEqual(tr, wantTr) {
		t.Fatalf("transitions %v\nwant %v", tr, wantTr)
	}

	// A submit of the failed task is a new submission with its own attempts.
	res := submit(t, s, "alice", tk.ID, tk.ConversationID, tk.Input)
	if !res.Retried || res.Task.Attempt != 4 {
		t.Fatalf("resubmit: %+v", res)
	}
	claim(t, s, tk.ID)
	clk.Advance(time.Minute)
	got, err := s.ExpireLeases(ctx, nil)
	if err != nil || len(got) != 1 || got[0].Status != task.StatusPending || got[0].Attempt != 5 {
		t.Fatalf("lost lease of the resubmission: %+v %v", got, err)
	}
}

func TestExpireLeasesFinishesARequestedCancel(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second})
	ctx := context.Background()
	r := snapshot(t, s, claim(t, s, newTask(t, s, "alice").ID), "half")
	if _, err := s.Cancel(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	// A claim does not take a task whose cancel waits: maintenance ends it.
	_, err := s.Claim(ctx, task.Claim{TaskID: r.ID, RunnerID: "r2"})
	wantErr(t, err, task.ErrNotClaimable)
	got, err := s.ExpireLeases(ctx, logFold(task.Event{Type: task.EventDelta, Seq: 1, Text: " way"}))
	if err != nil || len(got) != 1 {
		t.Fatalf("expire leases: %v %v", got, err)
	}
	c := got[0]
	if c.Status != task.StatusCancelled || c.Output != "half way" || c.Seq != r.Seq+2 ||
		c.Attempt != 1 || !c.FinishedAt.Equal(stored(clk.Now())) {
		t.Fatalf("cancelled %+v", c)
	}
	if content, st := placeholder(t, s, r.ID); content != "half way" || st != "cancelled" {
		t.Fatalf("placeholder %q %q", content, st)
	}
}

func TestExpireLeasesLeavesWhatChanged(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second})
	ctx := context.Background()
	revived := claim(t, s, newTask(t, s, "alice").ID)
	broken := claim(t, s, newTask(t, s, "alice").ID)
	clk.Advance(time.Minute)
	// While the fold reads the log, the first runner heart-beats again; the
	// fold of the second fails. Neither task changes.
	fold := func(ctx context.Context, tk task.Task) (task.Task, error) {
		if tk.ID == broken.ID {
			return task.Task{}, errors.New("log unavailable")
		}
		if _, err := s.Heartbeat(ctx, tk.ID, tk.Attempt); err != nil {
			t.Error(err)
		}
		return tk, nil
	}
	got, err := s.ExpireLeases(ctx, fold)
	if len(got) != 0 || err == nil {
		t.Fatalf("expire leases: %v %v; want nothing changed and the fold's error", got, err)
	}
	for _, id := range []string{revived.ID, broken.ID} {
		if tk, _ := s.Load(ctx, id); tk.Status != task.StatusRunning || tk.Attempt != 1 {
			t.Fatalf("task changed: %+v", tk)
		}
	}
}

func TestPurgeThenResubmit(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{IdempotencyTTL: 24 * time.Hour})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	if _, err := s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
		TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 2, Append: "first answer"}}); err != nil {
		t.Fatal(err)
	}
	pending := newTask(t, s, "alice")

	clk.Advance(24 * time.Hour)
	if n, err := s.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("purged %d at the TTL: %v", n, err)
	}
	clk.Advance(time.Microsecond)
	if n, err := s.Purge(ctx); err != nil || n != 1 {
		t.Fatalf("purged %d, want 1: %v", n, err)
	}
	_, err := s.Get(ctx, "alice", r.ID)
	wantCode(t, err, task.CodeNotFound)
	if n := count(t, s, `SELECT count(*) FROM task_transitions WHERE task_id = $1`, r.ID); n != 0 {
		t.Fatalf("%d transitions of a purged task", n)
	}
	if _, err := s.Load(ctx, pending.ID); err != nil {
		t.Fatalf("an unfinished task was purged: %v", err)
	}

	// The id is new again; the old messages stay and are not touched by the new task.
	res := submit(t, s, "alice", r.ID, r.ConversationID, r.Input)
	if !res.Created || res.Task.Attempt != 1 || res.Task.Seq != 0 {
		t.Fatalf("resubmit after purge: %+v", res)
	}
	again := claim(t, s, r.ID)
	if _, err := s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
		TaskID: r.ID, Attempt: 1, FromSeq: again.Seq, Seq: again.Seq + 2, Append: "second answer"}}); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := s.History(ctx, "alice", r.ConversationID, task.Page{})
	if err != nil || len(msgs) != 4 {
		t.Fatalf("history: %d messages, %v", len(msgs), err)
	}
	if msgs[1].Content != "first answer" || msgs[3].Content != "second answer" {
		t.Fatalf("answers %q and %q", msgs[1].Content, msgs[3].Content)
	}
}
