package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// chunks counts a task's output chunks.
func chunks(t testing.TB, s *postgres.Store, id string) int {
	return count(t, s, `SELECT count(*) FROM task_output WHERE task_id = $1`, id)
}

// storedOutput is tasks.output as stored, without the chunks.
func storedOutput(t testing.TB, s *postgres.Store, id string) string {
	t.Helper()
	var out string
	if err := s.Pool().QueryRow(context.Background(), `SELECT output FROM tasks WHERE id = $1`, id).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOutputIsAppendedInChunks: a running attempt's batches are chunks of
// their own (the row's output is never rewritten), every read sees the
// whole output, and the finish folds them back into the row, once.
func TestOutputIsAppendedInChunks(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	seq := r.Seq
	for _, text := range []string{"one ", "", "two ", "three "} {
		if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: seq, Seq: seq + 1,
			Append: text, Progress: 10}); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	if n := chunks(t, s, r.ID); n != 3 {
		t.Fatalf("%d chunks, want 3 (an empty batch adds none)", n)
	}
	if out := storedOutput(t, s, r.ID); out != "" {
		t.Fatalf("the row's output was rewritten: %q", out)
	}
	got, err := s.Get(ctx, "alice", r.ID)
	if err != nil || got.Output != "one two three " || got.Seq != seq {
		t.Fatalf("get: %q seq %d %v", got.Output, got.Seq, err)
	}
	// The answer of a cancel request carries the whole output too.
	res, err := s.Cancel(ctx, "alice", r.ID)
	if err != nil || !res.Requested || res.Task.Output != "one two three " {
		t.Fatalf("cancel: %+v %v", res, err)
	}

	done, err := s.Finish(ctx, task.Finish{Status: task.StatusCancelled, Snapshot: task.Snapshot{
		TaskID: r.ID, Attempt: 1, FromSeq: seq, Seq: seq + 2, Append: "four"}})
	if err != nil {
		t.Fatal(err)
	}
	if done.Output != "one two three four" || storedOutput(t, s, r.ID) != done.Output || chunks(t, s, r.ID) != 0 {
		t.Fatalf("finished %q, stored %q, %d chunks", done.Output, storedOutput(t, s, r.ID), chunks(t, s, r.ID))
	}
	if content, status := placeholder(t, s, r.ID); content != done.Output || status != "cancelled" {
		t.Fatalf("placeholder %q %s", content, status)
	}
}

// TestHandedOverAttemptKeepsTheChunksOnce: a lease hand-over folds the lost
// attempt's chunks into the kept prefix; the next attempt's chunks follow it.
func TestHandedOverAttemptKeepsTheChunksOnce(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	for i, text := range []string{"ab", "cd"} {
		if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: r.Seq + int64(i),
			Seq: r.Seq + int64(i) + 1, Append: text, Progress: 5}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(11 * time.Second)
	handed, err := s.ExpireLeases(ctx, nil)
	if err != nil || len(handed) != 1 || handed[0].Output != "abcd" || handed[0].Keep != 4 {
		t.Fatalf("handed over %+v %v", handed, err)
	}
	if chunks(t, s, r.ID) != 0 || storedOutput(t, s, r.ID) != "abcd" {
		t.Fatalf("after the hand-over: %d chunks, stored %q", chunks(t, s, r.ID), storedOutput(t, s, r.ID))
	}
	again := claim(t, s, r.ID)
	if again.Output != "abcd" {
		t.Fatalf("claimed with %q", again.Output)
	}
	if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 2, FromSeq: again.Seq,
		Seq: again.Seq + 1, Append: "ef", Progress: 50}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, r.ID); got.Output != "abcdef" {
		t.Fatalf("attempt 2 output %q", got.Output)
	}
}

// BenchmarkSaveSnapshotLongAnswer: a batch of a few tokens, appended to an
// answer of 1 KB and of 1 MB. Appending chunks costs the same whatever the
// answer's length (rewriting the row's output cost the whole answer every
// batch: O(n²) bytes over a long answer).
func BenchmarkSaveSnapshotLongAnswer(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("answer=%dKiB", size>>10), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			r := claim(b, s, newTask(b, s, "alice").ID)
			seq := r.Seq
			block := strings.Repeat("x", min(size, 64<<10))
			for written := 0; written < size; written += len(block) {
				if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: seq,
					Seq: seq + 1, Append: block, Progress: 1}); err != nil {
					b.Fatal(err)
				}
				seq++
			}
			b.ResetTimer()
			for b.Loop() {
				if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: seq,
					Seq: seq + 8, Append: "eight tokens of text ", Progress: 1}); err != nil {
					b.Fatal(err)
				}
				seq += 8
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
