package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestDispatchLost: a task whose row committed but whose dispatch message
// never reached NATS (a gateway that died between its commit and its
// publish, or a publish lost in an outage). The harness makes one with the
// store's own Submit, which commits the task and its messages and
// dispatches nothing, then follows it with three tabs. Maintenance (every
// gateway and runner, here every 200 ms) must dispatch it again once it has
// been pending for 5 s; a runner then runs it, and it ends exact on
// attempt 1.
func TestDispatchLost(t *testing.T) {
	forms(t, single, func(t *testing.T, f form) {
		s := newSystem(t, f.opts(3*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		store, err := postgres.Open(ctx, s.dbURL, postgres.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		for i := 1; i <= trials(t, 1); i++ {
			s.tally.trial()
			t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { dispatchLostTrial(t, s, store) })
		}
	})
}

func dispatchLostTrial(t *testing.T, s *system, store *postgres.Store) {
	a := newAnswer(100, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := store.Submit(ctx, task.SubmitRequest{UserID: testUser, TaskID: a.taskID, ConversationID: a.conv, Content: a.content})
	if err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	if !res.Created || res.Task.Status != task.StatusPending {
		t.Fatalf("submit through the store: created %v status %s", res.Created, res.Task.Status)
	}
	s.notef(t, "committed %s %q through the store: no dispatch was published", a.taskID, a.content)
	s.follow(t, a, 1, 3)

	row, err := s.waitRow(a.taskID, 60*time.Second, "the task claimed by a runner", func(r pgTask) bool { return r.Status != "pending" })
	if err != nil {
		t.Fatal(err)
	}
	claimed := time.Since(committed)
	s.notef(t, "claimed by %s %v after the commit (status %s)", row.RunnerID, claimed.Round(time.Millisecond), row.Status)
	s.tally.time("commit to the claim (Postgres running)", claimed)

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	s.verify(t, a, expect{attempt: 1})
	for _, tb := range a.tabs {
		tb.view(func(f *follower) {
			if at, ok := f.firstDeltaAt[1]; ok {
				s.tally.time("commit to the first delta on each tab", at.Sub(committed))
			}
		})
	}
}
