package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestUndispatchedOncePerPeriod: a waiting task is picked for a dispatch
// again by one caller (process) of many, then not again until the period
// has passed; a new attempt starts afresh.
func TestUndispatchedOncePerPeriod(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	tk := newTask(t, s, "alice")
	clk.Advance(6 * time.Second)
	first, err := s.Undispatched(ctx, 5*time.Second, 30*time.Second)
	if err != nil || len(first) != 1 || first[0].ID != tk.ID {
		t.Fatalf("first pick: %v %v", first, err)
	}
	for range 3 { // other processes' rounds, and this one's next ones
		if again, err := s.Undispatched(ctx, 5*time.Second, 30*time.Second); err != nil || len(again) != 0 {
			t.Fatalf("picked again within the period: %v %v", again, err)
		}
		clk.Advance(time.Second)
	}
	clk.Advance(28 * time.Second)
	if later, err := s.Undispatched(ctx, 5*time.Second, 30*time.Second); err != nil || len(later) != 1 {
		t.Fatalf("after the period: %v %v", later, err)
	}
	// The pick changes nothing a client sees.
	got, err := s.Get(ctx, "alice", tk.ID)
	if err != nil || !got.UpdatedAt.Equal(tk.UpdatedAt) || got.Seq != tk.Seq {
		t.Fatalf("the task changed: %+v %v", got, err)
	}
}

// TestPurgeLogs: finished tasks are purged once each after the grace,
// running and recent ones never; a failed purge is tried again; a retried
// task's log is purged again when it finishes again.
func TestPurgeLogs(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	finish := func(id string, status task.Status) {
		t.Helper()
		r := claim(t, s, id)
		f := task.Finish{Status: status, Snapshot: task.Snapshot{TaskID: id, Attempt: r.Attempt, FromSeq: r.Seq, Seq: r.Seq + 1}}
		if status == task.StatusFailed {
			f.Error = ptr("boom")
		}
		if _, err := s.Finish(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	done, failed, running := newTask(t, s, "alice"), newTask(t, s, "alice"), newTask(t, s, "alice")
	finish(done.ID, task.StatusDone)
	finish(failed.ID, task.StatusFailed)
	claim(t, s, running.ID)

	var purged []string
	var broken error
	purge := func(_ context.Context, id string) error {
		if broken != nil {
			return broken
		}
		purged = append(purged, id)
		return nil
	}
	if n, err := s.PurgeLogs(ctx, time.Minute, purge); n != 0 || err != nil {
		t.Fatalf("purged within the grace: %d %v", n, err)
	}
	clk.Advance(time.Minute + time.Second)
	broken = errors.New("nats down")
	if n, err := s.PurgeLogs(ctx, time.Minute, purge); n != 0 || !errors.Is(err, broken) {
		t.Fatalf("failed purge: %d %v", n, err)
	}
	broken = nil
	if n, err := s.PurgeLogs(ctx, time.Minute, purge); n != 2 || err != nil {
		t.Fatalf("purge: %d %v", n, err)
	}
	slices.Sort(purged)
	want := []string{done.ID, failed.ID}
	slices.Sort(want)
	if !slices.Equal(purged, want) {
		t.Fatalf("purged %v, want %v", purged, want)
	}
	if n, err := s.PurgeLogs(ctx, time.Minute, purge); n != 0 || err != nil {
		t.Fatalf("purged twice: %d %v", n, err)
	}

	// A retry of the failed task: its new attempt's events are purged
	// again once it has finished again.
	submit(t, s, "alice", failed.ID, failed.ConversationID, "hello")
	finish(failed.ID, task.StatusDone)
	clk.Advance(2 * time.Minute)
	purged = nil
	if n, err := s.PurgeLogs(ctx, time.Minute, purge); n != 1 || err != nil || purged[0] != failed.ID {
		t.Fatalf("after the retry: %d %v %v", n, err, purged)
	}
}

// TestExpirePendingInOneStatement: a batch of waiting tasks fails together,
// each exactly as one failed alone: its status event's seq, the transition,
// and the assistant message with the output its attempt kept.
func TestExpirePendingInOneStatement(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{PendingTimeout: time.Minute, Lease: 10 * time.Second, MaxAttempts: 3})
	ctx := context.Background()
	// A task handed over with a kept answer, pending again.
	kept := claim(t, s, newTask(t, s, "alice").ID)
	if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: kept.ID, Attempt: 1, FromSeq: kept.Seq,
		Seq: kept.Seq + 1, Append: "kept", Progress: 40}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second)
	if handed, err := s.ExpireLeases(ctx, nil); err != nil || len(handed) != 1 {
		t.Fatalf("hand over: %v %v", handed, err)
	}
	plain := []task.Task{newTask(t, s, "alice"), newTask(t, s, "bob")}
	clk.Advance(time.Minute + time.Second)
	got, err := s.ExpirePending(ctx)
	if err != nil || len(got) != 3 {
		t.Fatalf("expired %d: %v", len(got), err)
	}
	for _, f := range got {
		if f.Status != task.StatusFailed || f.Error == nil || *f.Error != task.ErrNoRunner || f.FinishedAt.IsZero() {
			t.Fatalf("expired %+v", f)
		}
		content, status := placeholder(t, s, f.ID)
		want := ""
		if f.ID == kept.ID {
			want = "kept"
			if f.Output != "kept" || f.Progress != 40 || f.Attempt != 2 || f.Seq != kept.Seq+3 {
				t.Fatalf("expired the handed-over task as %+v", f)
			}
		}
		if content != want || status != "failed" {
			t.Fatalf("placeholder of %s: %q %s", f.ID, content, status)
		}
		trs := transitions(t, s, f.ID)
		if last := trs[len(trs)-1]; last != "pending>failed:"+task.ErrNoRunner {
			t.Fatalf("transitions %v", trs)
		}
	}
	for _, p := range plain {
		if f, _ := s.Load(ctx, p.ID); f.Seq != p.Seq+1 {
			t.Fatalf("seq %d after %d", f.Seq, p.Seq)
		}
	}
}

// BenchmarkExpirePending: a batch of 500 waiting tasks failed with
// no_runner (one statement; it was three per task in one transaction).
func BenchmarkExpirePending(b *testing.B) {
	s, clk := setup(b, postgres.Config{PendingTimeout: time.Minute})
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		for range 500 {
			newTask(b, s, "alice")
		}
		clk.Advance(2 * time.Minute)
		b.StartTimer()
		got, err := s.ExpirePending(ctx)
		if err != nil || len(got) != 500 {
			b.Fatalf("expired %d: %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*500), "µs/task")
}

// BenchmarkContextLongConversation: the context of a task at the end of a
// conversation of 20,000 messages (the newest 200 of them). The lateral
// form walks the page index backwards and stops; the join it replaced read
// and sorted the whole conversation.
func BenchmarkContextLongConversation(b *testing.B) {
	s, clk := setup(b, postgres.Config{})
	ctx := context.Background()
	conv := newID()
	first := submit(b, s, "alice", newID(), conv, "first").Task
	_, err := s.Pool().Exec(ctx, `
		INSERT INTO messages (id, conversation_id, role, content, task_id, status, created_at)
		SELECT gen_random_uuid(), $1, 'user', 'message ' || i, NULL, NULL,
			$2::timestamptz + make_interval(secs => i)
		FROM generate_series(1, 20000) AS i`, conv, first.CreatedAt)
	if err != nil {
		b.Fatal(err)
	}
	clk.Advance(24 * time.Hour)
	last := submit(b, s, "alice", newID(), conv, "last").Task
	if _, err := s.Pool().Exec(ctx, `ANALYZE messages`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		msgs, err := s.Context(ctx, last.ID, 200)
		if err != nil || len(msgs) != 200 {
			b.Fatalf("context: %d %v", len(msgs), err)
		}
	}
}
