package postgres_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

func TestClaimPending(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second})
	ctx := context.Background()
	created := newTask(t, s, "alice")
	clk.Advance(time.Second)

	// The log may hold events the store has not seen: numbering continues after them.
	got, err := s.Claim(ctx, task.Claim{TaskID: created.ID, RunnerID: "r1", LastSeq: 4})
	if err != nil {
		t.Fatal(err)
	}
	now := stored(clk.Now())
	if got.Status != task.StatusRunning || got.Attempt != 1 || got.Seq != 5 || got.RunnerID != "r1" ||
		!got.LeaseUntil.Equal(now.Add(10*time.Second)) || !got.UpdatedAt.Equal(now) {
		t.Fatalf("claimed %+v", got)
	}
	_, err = s.Claim(ctx, task.Claim{TaskID: created.ID, RunnerID: "r2"})
	wantErr(t, err, task.ErrNotClaimable)
	_, err = s.Claim(ctx, task.Claim{TaskID: newID(), RunnerID: "r2"})
	wantCode(t, err, task.CodeNotFound)
	if tr := transitions(t, s, created.ID); !reflect.DeepEqual(tr,
		[]string{">pending:submitted", "pending>running:claimed"}) {
		t.Fatalf("transitions %v", tr)
	}
}

func TestClaimIsWonByOneRunner(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	for range 10 {
		id := newTask(t, s, "alice").ID
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  int
			errs []error
		)
		for r := range 8 {
			wg.Go(func() {
				_, err := s.Claim(context.Background(), task.Claim{TaskID: id, RunnerID: string(rune('a' + r))})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					won++
				} else {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d runners claimed one task", won)
		}
		for _, err := range errs {
			wantErr(t, err, task.ErrNotClaimable)
		}
	}
}

func TestExpiredLeaseIsHandedOverKeepingTheAnswerAndFencesTheOldRunner(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second})
	ctx := context.Background()
	old := claim(t, s, newTask(t, s, "alice").ID)
	if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: old.ID, Attempt: 1, FromSeq: old.Seq,
		Seq: old.Seq + 2, Append: "aé", Progress: 10}); err != nil {
		t.Fatal(err)
	}

	// Not yet expired: the lease is held.
	clk.Advance(10 * time.Second)
	_, err := s.Claim(ctx, task.Claim{TaskID: old.ID, RunnerID: "r2"})
	wantErr(t, err, task.ErrNotClaimable)

	// Expired: a claim still does not take it; maintenance hands it over,
	// keeping the answer so far.
	clk.Advance(time.Microsecond)
	_, err = s.Claim(ctx, task.Claim{TaskID: old.ID, RunnerID: "r2"})
	wantErr(t, err, task.ErrNotClaimable)
	handed, err := s.ExpireLeases(ctx, nil)
	if err != nil || len(handed) != 1 {
		t.Fatalf("expire leases: %+v %v", handed, err)
	}
	if h := handed[0]; h.Status != task.StatusPending || h.Attempt != 2 || h.Seq != old.Seq+3 ||
		h.Output != "aé" || h.Keep != len("aé") || h.Progress != 10 {
		t.Fatalf("handed over %+v", h)
	}
	if e := task.StatusEvent(handed[0]); e.Keep != 3 || e.Attempt != 2 {
		t.Fatalf("status event %+v: the new attempt's first event carries keep", e)
	}
	got, err := s.Claim(ctx, task.Claim{TaskID: old.ID, RunnerID: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempt != 2 || got.Seq != old.Seq+4 || got.Output != "aé" || got.Keep != 3 ||
		got.Progress != 10 || got.RunnerID != "r2" {
		t.Fatalf("claimed %+v", got)
	}
	wantTr := []string{">pending:submitted", "pending>running:claimed",
		"running>pending:lease_expired", "pending>running:claimed"}
	if tr := transitions(t, s, old.ID); !reflect.DeepEqual(tr, wantTr) {
		t.Fatalf("transitions %v, want %v", tr, wantTr)
	}

	// The first runner comes back: every write of attempt 1 is fenced out.
	_, err = s.Heartbeat(ctx, old.ID, 1)
	wantErr(t, err, task.ErrFenced)
	err = s.SaveSnapshot(ctx, task.Snapshot{TaskID: old.ID, Attempt: 1, FromSeq: got.Seq, Seq: got.Seq + 1, Append: "x"})
	wantErr(t, err, task.ErrFenced)
	_, err = s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
		TaskID: old.ID, Attempt: 1, FromSeq: got.Seq, Seq: got.Seq + 1, Append: "x"}})
	wantErr(t, err, task.ErrFenced)
	_, err = s.Finish(ctx, task.Finish{Status: task.StatusCancelled, Snapshot: task.Snapshot{
		TaskID: old.ID, Attempt: 1, FromSeq: got.Seq, Seq: got.Seq + 1}})
	wantErr(t, err, task.ErrFenced)
	_, err = s.Restart(ctx, old.ID, 1)
	wantErr(t, err, task.ErrFenced)
	if now, _ := s.Load(ctx, old.ID); !reflect.DeepEqual(now, got) {
		t.Fatalf("fenced writes changed the task:\n got %+v\nwant %+v", now, got)
	}
}

// An engine that cannot continue the kept answer starts it over: the attempt
// becomes the next, pending, with nothing kept, and only its own runner can
// do that.
func TestRestartStartsOverWithNothingKept(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: r.Seq,
		Seq: r.Seq + 1, Append: "kept", Progress: 30}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second)
	if _, err := s.ExpireLeases(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cont := claim(t, s, r.ID)
	if cont.Keep != 4 || cont.Output != "kept" {
		t.Fatalf("continuation %+v", cont)
	}
	_, err := s.Restart(ctx, r.ID, 1)
	wantErr(t, err, task.ErrFenced)
	over, err := s.Restart(ctx, r.ID, cont.Attempt)
	if err != nil {
		t.Fatal(err)
	}
	if over.Status != task.StatusPending || over.Attempt != 3 || over.Seq != cont.Seq+1 ||
		over.Output != "" || over.Keep != 0 || over.Progress != 0 || over.RunnerID != "" {
		t.Fatalf("restarted %+v", over)
	}
	if e := task.StatusEvent(over); e.Keep != 0 || e.Attempt != 3 || e.Status != task.StatusPending {
		t.Fatalf("status event %+v", e)
	}
	again := claim(t, s, r.ID)
	if again.Attempt != 3 || again.Output != "" || again.Keep != 0 {
		t.Fatalf("claimed after restart %+v", again)
	}
	tr := transitions(t, s, r.ID)
	if tr[len(tr)-2] != "running>pending:restarted" {
		t.Fatalf("transitions %v", tr)
	}
}

func TestClaimRefusesAnExpiredLeaseWithoutAttemptsLeft(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{MaxAttempts: 1})
	r := claim(t, s, newTask(t, s, "alice").ID)
	clk.Advance(time.Hour)
	_, err := s.Claim(context.Background(), task.Claim{TaskID: r.ID, RunnerID: "r2"})
	wantErr(t, err, task.ErrNotClaimable)
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{Lease: 10 * time.Second})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	clk.Advance(8 * time.Second)
	cancelRequested, err := s.Heartbeat(ctx, r.ID, 1)
	if err != nil || cancelRequested {
		t.Fatalf("heartbeat: %v %v", cancelRequested, err)
	}
	clk.Advance(8 * time.Second) // past the first lease, within the extended one
	if _, err := s.Claim(ctx, task.Claim{TaskID: r.ID, RunnerID: "r2"}); err == nil {
		t.Fatal("claimed a task whose lease was extended")
	}
	if _, err := s.Cancel(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	cancelRequested, err = s.Heartbeat(ctx, r.ID, 1)
	if err != nil || !cancelRequested {
		t.Fatalf("heartbeat after cancel: %v %v", cancelRequested, err)
	}
	_, err = s.Heartbeat(ctx, r.ID, 2)
	wantErr(t, err, task.ErrFenced)
	_, err = s.Heartbeat(ctx, newID(), 1)
	wantCode(t, err, task.CodeNotFound)
}

func TestSaveSnapshot(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	clk.Advance(time.Second)
	if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: 1, Seq: 3,
		Append: "Hello, ", Progress: 30, StreamPos: 11}); err != nil {
		t.Fatal(err)
	}
	// Progress never decreases within an attempt.
	if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: 3, Seq: 4,
		Append: "world", Progress: 20, StreamPos: 12}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Output != "Hello, world" || got.Seq != 4 || got.Progress != 30 || got.StreamPos != 12 ||
		!got.UpdatedAt.Equal(stored(clk.Now())) {
		t.Fatalf("after snapshots %+v", got)
	}

	// A batch that does not continue the stored seq is refused, whichever way it is off.
	for _, from := range []int64{3, 5} {
		err = s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: from, Seq: 6, Append: "!"})
		wantErr(t, err, task.ErrSeqMismatch)
	}
	err = s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 2, FromSeq: 4, Seq: 6, Append: "!"})
	wantErr(t, err, task.ErrFenced)
	err = s.SaveSnapshot(ctx, task.Snapshot{TaskID: newID(), Attempt: 1, FromSeq: 4, Seq: 6})
	wantCode(t, err, task.CodeNotFound)
	if after, _ := s.Load(ctx, r.ID); !reflect.DeepEqual(after, got) {
		t.Fatalf("refused snapshots changed the task:\n got %+v\nwant %+v", after, got)
	}

	// Not running any more: fenced.
	if _, err := s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
		TaskID: r.ID, Attempt: 1, FromSeq: 4, Seq: 5}}); err != nil {
		t.Fatal(err)
	}
	err = s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: 5, Seq: 6, Append: "!"})
	wantErr(t, err, task.ErrFenced)
}

func TestFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		status    task.Status
		err       *string
		resultRef *string
		reason    string
	}{
		{task.StatusDone, nil, ptr("ref-1"), "finished"},
		{task.StatusFailed, ptr("demo failure"), nil, "engine_failed"},
		{task.StatusCancelled, nil, nil, "cancelled"},
	}
	s, clk := setup(t, postgres.Config{})
	for _, tc := range cases {
		t.Run(string(tc.status), func(t *testing.T) {
			r := claim(t, s, newTask(t, s, "alice").ID)
			if err := s.SaveSnapshot(ctx, task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: r.Seq,
				Seq: r.Seq + 1, Append: "an ", Progress: 50}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			got, err := s.Finish(ctx, task.Finish{Status: tc.status, Error: tc.err, ResultRef: tc.resultRef,
				Snapshot: task.Snapshot{TaskID: r.ID, Attempt: 1, FromSeq: r.Seq + 1, Seq: r.Seq + 3,
					Append: "answer", Progress: 90, StreamPos: 7}})
			if err != nil {
				t.Fatal(err)
			}
			now := stored(clk.Now())
			if got.Status != tc.status || got.Output != "an answer" || got.Seq != r.Seq+3 ||
				got.Progress != 90 || got.StreamPos != 7 || !reflect.DeepEqual(got.Error, tc.err) ||
				!reflect.DeepEqual(got.ResultRef, tc.resultRef) || !got.FinishedAt.Equal(now) {
				t.Fatalf("finished %+v", got)
			}
			if c, st := placeholder(t, s, r.ID); c != "an answer" || st != string(tc.status) {
				t.Fatalf("placeholder %q %q", c, st)
			}
			if tr := transitions(t, s, r.ID); tr[len(tr)-1] != "running>"+string(tc.status)+":"+tc.reason {
				t.Fatalf("transitions %v", tr)
			}
			// Finishing twice is fenced: the attempt is over.
			_, err = s.Finish(ctx, task.Finish{Status: tc.status, Error: tc.err, Snapshot: task.Snapshot{
				TaskID: r.ID, Attempt: 1, FromSeq: r.Seq + 3, Seq: r.Seq + 4}})
			wantErr(t, err, task.ErrFenced)
		})
	}
}

func TestFinishAfterACancelRequestMustCancel(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	res, err := s.Cancel(ctx, "alice", r.ID)
	if err != nil || !res.Requested || res.Cancelled || res.Task.Status != task.StatusRunning {
		t.Fatalf("cancel of a running task: %+v %v", res, err)
	}
	before, _ := s.Load(ctx, r.ID)
	for _, st := range []task.Status{task.StatusDone, task.StatusFailed} {
		_, err = s.Finish(ctx, task.Finish{Status: st, Error: ptr("x"), Snapshot: task.Snapshot{
			TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 2, Append: "partial"}})
		wantErr(t, err, task.ErrCancelRequested)
	}
	if after, _ := s.Load(ctx, r.ID); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused finish changed the task")
	}
	got, err := s.Finish(ctx, task.Finish{Status: task.StatusCancelled, Snapshot: task.Snapshot{
		TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 2, Append: "partial"}})
	if err != nil || got.Status != task.StatusCancelled || got.Output != "partial" {
		t.Fatalf("finish as cancelled: %+v %v", got, err)
	}
	if c, st := placeholder(t, s, r.ID); c != "partial" || st != "cancelled" {
		t.Fatalf("placeholder %q %q", c, st)
	}
}
