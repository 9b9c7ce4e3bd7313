package postgres_test

import (
	"context"
	"testing"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
	"github.com/tether-dev/tether/internal/task"
)

// benchStore opens a store with a pool large enough for RunParallel.
func benchStore(b *testing.B) *postgres.Store {
	b.Helper()
	s, err := postgres.Open(context.Background(), pgtest.URL(b)+"&pool_max_conns=16", postgres.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s
}

// BenchmarkSubmitNew: new tasks, each in its own conversation, from many goroutines.
func BenchmarkSubmitNew(b *testing.B) { benchSubmitNew(b, 4) }

// BenchmarkSubmitNewMany: new tasks from 16 goroutines a core, as a burst
// of tabs makes them: what group commit is for.
func BenchmarkSubmitNewMany(b *testing.B) { benchSubmitNew(b, 16) }

// benchSubmitNew submits new tasks, each in its own conversation, from
// parallelism goroutines a core.
func benchSubmitNew(b *testing.B, parallelism int) {
	s := benchStore(b)
	ctx := context.Background()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := s.Submit(ctx, task.SubmitRequest{UserID: "alice", TaskID: newID(),
				ConversationID: newID(), Content: "a question of average length for a chat"})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}

// BenchmarkRawInsert is the baseline of the submit benchmarks (as in
// cmd/bench): one row a submit, INSERT … ON CONFLICT, from as many
// goroutines as BenchmarkSubmitNew.
func BenchmarkRawInsert(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, `CREATE TABLE bench_insert (id uuid PRIMARY KEY, user_id text NOT NULL,
		conversation_id uuid NOT NULL, content text NOT NULL, created_at timestamptz NOT NULL)`)
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, err := s.Pool().Exec(ctx, `INSERT INTO bench_insert (id, user_id, conversation_id, content, created_at)
				VALUES ($1, $2, $3, $4, now()) ON CONFLICT (id) DO NOTHING`,
				newID(), "alice", newID(), "a question of average length for a chat")
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// BenchmarkSubmitContended: every goroutine submits the same id (a
// double-click storm): all but the first are lookups under the row lock.
func BenchmarkSubmitContended(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	req := task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "once"}
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Submit(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}

// BenchmarkSaveSnapshot: one runner's snapshot writes of one task, each a
// batch of a few tokens.
func BenchmarkSaveSnapshot(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	r := claim(b, s, newTask(b, s, "alice").ID)
	seq := r.Seq
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: r.Attempt, FromSeq: seq,
			Seq: seq + 8, Append: "eight tokens of text ", Progress: min(i/100, 100), StreamPos: uint64(seq + 8)})
		if err != nil {
			b.Fatal(err)
		}
		seq += 8
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkSaveSnapshotParallel: snapshot writes of many tasks at once, as
// several runners make them.
func BenchmarkSaveSnapshotParallel(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		r := claim(b, s, newTask(b, s, "alice").ID)
		seq := r.Seq
		for pb.Next() {
			err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: r.Attempt, FromSeq: seq,
				Seq: seq + 8, Append: "eight tokens ", Progress: 10})
			if err != nil {
				b.Error(err)
				return
			}
			seq += 8
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}
