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

func TestCancelPending(t *testing.T) {
	t.Parallel()
	s, clk := setup(t, postgres.Config{})
	ctx := context.Background()
	created := newTask(t, s, "alice")
	clk.Advance(time.Second)
	res, err := s.Cancel(ctx, "alice", created.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := stored(clk.Now())
	got := res.Task
	if !res.Cancelled || res.Requested || got.Status != task.StatusCancelled || got.Seq != 1 ||
		!got.FinishedAt.Equal(now) || !got.UpdatedAt.Equal(now) {
		t.Fatalf("cancel of a pending task: %+v", res)
	}
	if c, st := placeholder(t, s, created.ID); c != "" || st != "cancelled" {
		t.Fatalf("placeholder %q %q", c, st)
	}
	// Idempotent: a second cancel changes nothing and says so.
	clk.Advance(time.Second)
	again, err := s.Cancel(ctx, "alice", created.ID)
	if err != nil || again.Cancelled || again.Requested || !reflect.DeepEqual(again.Task, got) {
		t.Fatalf("second cancel: %+v %v", again, err)
	}
	if tr := transitions(t, s, created.ID); !reflect.DeepEqual(tr,
		[]string{">pending:submitted", "pending>cancelled:cancelled"}) {
		t.Fatalf("transitions %v", tr)
	}
	// Nobody can claim it now.
	_, err = s.Claim(ctx, task.Claim{TaskID: created.ID, RunnerID: "r1"})
	wantErr(t, err, task.ErrNotClaimable)
}

func TestCancelRunningIsRequestedOnce(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	r := claim(t, s, newTask(t, s, "alice").ID)
	first, err := s.Cancel(ctx, "alice", r.ID)
	if err != nil || !first.Requested || first.Cancelled || first.Task.Status != task.StatusRunning ||
		!first.Task.CancelRequested || first.Task.Seq != r.Seq {
		t.Fatalf("cancel of a running task: %+v %v", first, err)
	}
	second, err := s.Cancel(ctx, "alice", r.ID)
	if err != nil || !second.Requested || second.Cancelled || !reflect.DeepEqual(second.Task, first.Task) {
		t.Fatalf("second cancel: %+v %v", second, err)
	}
	if n := len(transitions(t, s, r.ID)); n != 2 {
		t.Fatalf("%d transitions: a cancel request is no status change", n)
	}
}

func TestCancelFinishedChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	for _, st := range []task.Status{task.StatusDone, task.StatusFailed, task.StatusCancelled} {
		r := claim(t, s, newTask(t, s, "alice").ID)
		done, err := s.Finish(ctx, task.Finish{Status: st, Error: ptr("boom"), Snapshot: task.Snapshot{
			TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 1}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Cancel(ctx, "alice", r.ID)
		if err != nil || res.Cancelled || res.Requested || !reflect.DeepEqual(res.Task, done) {
			t.Fatalf("cancel of a %s task: %+v %v", st, res, err)
		}
	}
}

// TestCancelRacesFinish runs a user's cancel against the runner's finish of
// one task many times: whichever commits first wins, and the other changes
// nothing. The end state is one of exactly two consistent outcomes.
func TestCancelRacesFinish(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	outcomes := map[string]int{}
	for range 60 {
		r := claim(t, s, newTask(t, s, "alice").ID)
		var (
			wg        sync.WaitGroup
			cancelRes task.CancelResult
			cancelErr error
			finished  task.Task
			finishErr error
		)
		wg.Go(func() { cancelRes, cancelErr = s.Cancel(ctx, "alice", r.ID) })
		wg.Go(func() {
			finished, finishErr = s.Finish(ctx, task.Finish{Status: task.StatusDone, Snapshot: task.Snapshot{
				TaskID: r.ID, Attempt: 1, FromSeq: r.Seq, Seq: r.Seq + 2, Append: "answer", Progress: 100}})
		})
		wg.Wait()
		if cancelErr != nil {
			t.Fatalf("cancel: %v", cancelErr)
		}
		final, err := s.Load(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		content, msgStatus := placeholder(t, s, r.ID)
		switch {
		case finishErr == nil:
			// The finish committed first; the cancel found a done task.
			if cancelRes.Cancelled || cancelRes.Requested || cancelRes.Task.Status != task.StatusDone ||
				!reflect.DeepEqual(final, finished) || final.CancelRequested ||
				content != "answer" || msgStatus != "done" {
				t.Fatalf("finish won, but: cancel %+v, final %+v, message %q %q", cancelRes, final, content, msgStatus)
			}
			outcomes["finish first"]++
		case errors.Is(finishErr, task.ErrCancelRequested):
			// The cancel committed first; the finish wrote nothing.
			if !cancelRes.Requested || cancelRes.Cancelled || final.Status != task.StatusRunning ||
				!final.CancelRequested || final.Seq != r.Seq || final.Output != "" ||
				content != "" || msgStatus != "generating" {
				t.Fatalf("cancel won, but: cancel %+v, final %+v, message %q %q", cancelRes, final, content, msgStatus)
			}
			outcomes["cancel first"]++
		default:
			t.Fatalf("finish: %v", finishErr)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestCancelRacesClaim: a cancel of a pending task and a runner's claim;
// exactly one wins.
func TestCancelRacesClaim(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, postgres.Config{})
	ctx := context.Background()
	outcomes := map[string]int{}
	for range 60 {
		id := newTask(t, s, "alice").ID
		var (
			wg        sync.WaitGroup
			cancelRes task.CancelResult
			cancelErr error
			claimErr  error
		)
		wg.Go(func() { cancelRes, cancelErr = s.Cancel(ctx, "alice", id) })
		wg.Go(func() { _, claimErr = s.Claim(ctx, task.Claim{TaskID: id, RunnerID: "r1"}) })
		wg.Wait()
		if cancelErr != nil {
			t.Fatal(cancelErr)
		}
		final, _ := s.Load(ctx, id)
		switch {
		case claimErr == nil:
			if !cancelRes.Requested || final.Status != task.StatusRunning || !final.CancelRequested {
				t.Fatalf("claim won, but: cancel %+v, final %+v", cancelRes, final)
			}
			outcomes["claim first"]++
		case errors.Is(claimErr, task.ErrNotClaimable):
			if !cancelRes.Cancelled || final.Status != task.StatusCancelled {
				t.Fatalf("cancel won, but: cancel %+v, final %+v", cancelRes, final)
			}
			outcomes["cancel first"]++
		default:
			t.Fatalf("claim: %v", claimErr)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
