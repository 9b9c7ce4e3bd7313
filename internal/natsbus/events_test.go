package natsbus_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

func seqs(ms []task.Msg) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Event.Seq
	}
	return out
}

func checkSeqs(t *testing.T, got []task.Msg, from, to int64) {
	t.Helper()
	if len(got) != int(to-from+1) {
		t.Fatalf("got seqs %v, want %d..%d", seqs(got), from, to)
	}
	for i, m := range got {
		if m.Event.Seq != from+int64(i) {
			t.Fatalf("got seqs %v, want %d..%d", seqs(got), from, to)
		}
	}
}

func TestPublisherOrderDedupFlush(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)

	var mu sync.Mutex
	var live []task.Msg
	unsub, err := b.SubscribeTask(taskA, func(m task.Msg) {
		mu.Lock()
		live = append(live, m)
		mu.Unlock()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()

	p := b.NewPublisher()
	if pos, err := p.Flush(ctx); err != nil || pos != 0 {
		t.Fatalf("empty Flush = %d, %v", pos, err)
	}
	const n = 3000 // more than the prune threshold
	for seq := int64(1); seq <= n; seq++ {
		if err := p.Publish(delta(taskA, seq)); err != nil {
			t.Fatal(err)
		}
	}
	pos, err := p.Flush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pos != n {
		t.Fatalf("Flush stream seq = %d, want %d", pos, n)
	}

	// A retried publish of an event already logged changes nothing in the log
	// and its ack names the original position.
	if err := p.Publish(delta(taskA, 50)); err != nil {
		t.Fatal(err)
	}
	if pos, err := p.Flush(ctx); err != nil || pos != 50 {
		t.Fatalf("Flush after duplicate = %d, %v; want 50", pos, err)
	}
	if pos, err := p.Flush(ctx); err != nil || pos != 50 {
		t.Fatalf("idle Flush = %d, %v; want the last position again", pos, err)
	}
	logged, err := b.ReadLog(ctx, taskA, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, logged, 1, n)
	for i, m := range logged {
		if m.StreamPos != uint64(i+1) {
			t.Fatalf("event %d at stream position %d", m.Event.Seq, m.StreamPos)
		}
		if want := protocol.EncodeEvent(delta(taskA, m.Event.Seq)); !bytes.Equal(m.Data, want) {
			t.Fatalf("data %s, want %s", m.Data, want)
		}
	}

	// Live subscribers get every publish in order, the duplicate included.
	eventually.True(t, "live events", func() bool { mu.Lock(); defer mu.Unlock(); return len(live) == n+1 })
	mu.Lock()
	defer mu.Unlock()
	checkSeqs(t, live[:n], 1, n)
	if live[n].Event.Seq != 50 || live[n].StreamPos != 0 {
		t.Fatalf("last live message %+v", live[n])
	}
}

func TestPublishEventSync(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	e := task.Event{Type: task.EventStatus, TaskID: taskA, Seq: 1, Status: task.StatusCancelled, Attempt: 1}
	pos, err := b.PublishEventSync(ctx, e)
	if err != nil || pos != 1 {
		t.Fatalf("PublishEventSync = %d, %v", pos, err)
	}
	if pos, err := b.PublishEventSync(ctx, e); err != nil || pos != 1 {
		t.Fatalf("duplicate PublishEventSync = %d, %v; want 1", pos, err)
	}
	if _, err := b.PublishEventSync(ctx, task.Event{Type: task.EventDelta, TaskID: "a.b", Seq: 1, Attempt: 1}); err == nil {
		t.Fatal("a task id with a dot was published")
	}
}

func TestReadLogInterleaved(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	p := b.NewPublisher()
	// A1 B1 A2 B2 ... A20 B20: stream position of A's seq s is 2s-1.
	for seq := int64(1); seq <= 20; seq++ {
		for _, id := range []string{taskA, taskB} {
			if err := p.Publish(delta(id, seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		id       string
		after    int64
		from     uint64
		wantFrom int64
		wantTo   int64
	}{
		{"all of A", taskA, 0, 0, 1, 20},
		{"all of B", taskB, 0, 0, 1, 20},
		{"A after seq 5", taskA, 5, 0, 6, 20},
		{"A from the position of its seq 7", taskA, 0, 13, 7, 20},
		{"A from B's position before A's seq 7", taskA, 0, 12, 7, 20},
		{"A from position and after seq", taskA, 10, 13, 11, 20},
		{"B from its last position", taskB, 0, 40, 20, 20},
		{"A after its last seq", taskA, 20, 0, 1, 0},
		{"A from past its end", taskA, 0, 40, 1, 0},
		{"A from far past the end", taskA, 0, 1000, 1, 0},
		{"unknown task", "0190f3c4-5b6a-7c8d-9e0f-00000000000c", 0, 0, 1, 0},
	}
	for _, tt := range tests {
		got, err := b.ReadLog(ctx, tt.id, task.Position{Attempt: 1, Seq: tt.after}, tt.from)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for _, m := range got {
			if m.Event.TaskID != tt.id {
				t.Fatalf("%s: event of task %s", tt.name, m.Event.TaskID)
			}
		}
		t.Run(tt.name, func(t *testing.T) { checkSeqs(t, got, tt.wantFrom, tt.wantTo) })
	}
}

// A publish retried late lands after later events; ReadLog still returns the
// task's events once each, in seq order.
func TestReadLogOutOfOrder(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	for _, seq := range []int64{1, 3, 2, 3, 4} {
		if _, err := b.PublishEventSync(ctx, delta(taskA, seq)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.ReadLog(ctx, taskA, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, got, 1, 4)
}

// A runner fenced out by a lease expiry may log events of its old attempt
// with seqs the next attempt also uses. Message ids carry the attempt, so
// neither pushes the other out of the log, and ReadLog orders them by
// (attempt, seq): the stale ones first, then the attempt that replaced them.
func TestReadLogOrdersByAttempt(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	ev := func(attempt int, seq int64) task.Event {
		e := delta(taskA, seq)
		e.Attempt = attempt
		return e
	}
	for _, e := range []task.Event{ev(1, 1), ev(1, 2), ev(2, 3), ev(1, 3), ev(2, 4), ev(1, 4), ev(2, 3)} {
		if _, err := b.PublishEventSync(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.ReadLog(ctx, taskA, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []task.Position
	for _, m := range got {
		order = append(order, task.Position{Attempt: m.Event.Attempt, Seq: m.Event.Seq})
	}
	want := []task.Position{{Attempt: 1, Seq: 1}, {Attempt: 1, Seq: 2}, {Attempt: 1, Seq: 3},
		{Attempt: 1, Seq: 4}, {Attempt: 2, Seq: 3}, {Attempt: 2, Seq: 4}}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	after, err := b.ReadLog(ctx, taskA, task.Position{Attempt: 2, Seq: 3}, 0)
	if err != nil || len(after) != 1 || after[0].Event.Attempt != 2 || after[0].Event.Seq != 4 {
		t.Fatalf("after (2,3): %+v, %v", after, err)
	}
}

func TestReadLogCancelled(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	if _, err := b.PublishEventSync(ctxT(t), delta(taskA, 1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.ReadLog(ctx, taskA, task.Position{}, 0); err == nil {
		t.Fatal("ReadLog with a cancelled context succeeded")
	}
}

func TestLastEvent(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	if _, ok, err := b.LastEvent(ctx, taskA); err != nil || ok {
		t.Fatalf("LastEvent of an empty log = %v, %v", ok, err)
	}
	p := b.NewPublisher()
	for seq := int64(1); seq <= 3; seq++ {
		_ = p.Publish(delta(taskA, seq))
		_ = p.Publish(delta(taskB, seq))
	}
	done := task.Event{Type: task.EventStatus, TaskID: taskA, Seq: 4, Status: task.StatusDone, Attempt: 2, ResultRef: new("r")}
	_ = p.Publish(done)
	_ = p.Publish(delta(taskB, 4))
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m, ok, err := b.LastEvent(ctx, taskA)
	if err != nil || !ok {
		t.Fatalf("LastEvent = %v, %v", ok, err)
	}
	if m.StreamPos != 7 || m.Event.Seq != 4 || m.Event.Status != task.StatusDone || *m.Event.ResultRef != "r" ||
		!bytes.Equal(m.Data, protocol.EncodeEvent(done)) {
		t.Fatalf("LastEvent = %+v", m)
	}
}

// An ack that never comes is an error of Flush, not a hang.
func TestFlushReportsLostAcks(t *testing.T) {
	t.Parallel()
	srv, err := natsbus.StartServer(natsbus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := natsbus.Connect(context.Background(), srv.ClientURL(), natsbus.Config{
		PublishAckTimeout: 300 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := b.NewPublisher()
	ctx := ctxT(t)
	if err := p.Publish(delta(taskA, 1)); err != nil {
		t.Fatal(err)
	}
	if pos, err := p.Flush(ctx); err != nil || pos != 1 {
		t.Fatalf("Flush = %d, %v", pos, err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	// Published into the reconnect buffer or refused: either way it is not acked.
	if err := p.Publish(delta(taskA, 2)); err != nil {
		t.Logf("Publish refused: %v", err)
		return
	}
	_, err = p.Flush(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Flush after the server died = %v (context: %v)", err, ctx.Err())
	}
	t.Logf("Flush: %v", err)
}
