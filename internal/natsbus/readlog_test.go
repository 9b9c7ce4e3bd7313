package natsbus_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/task"
)

// publishInterleaved logs A1 B1 A2 B2 ... An Bn: the stream position of A's
// seq s is 2s-1.
func publishInterleaved(t *testing.T, b *natsbus.Bus, n int64) {
	t.Helper()
	p := b.NewPublisher()
	for seq := int64(1); seq <= n; seq++ {
		for _, id := range []string{taskA, taskB} {
			if err := p.Publish(delta(id, seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := p.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// A read longer than the messages ReadLog gets one at a time goes on with
// a consumer from where the gets stopped: nothing is skipped or repeated
// at the hand-over, wherever the read starts.
func TestReadLogPastTheDirectReads(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)
	publishInterleaved(t, b, 300)
	for _, tt := range []struct {
		name  string
		after int64
		from  uint64
		want  int64 // first seq
	}{
		{"all", 0, 0, 1},
		{"after seq 40", 40, 0, 41},
		{"from the position of seq 100", 0, 199, 100},
		{"from B's position before seq 100, after seq 120", 120, 198, 121},
	} {
		got, err := b.ReadLog(ctx, taskA, task.Position{Attempt: 1, Seq: tt.after}, tt.from)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		t.Run(tt.name, func(t *testing.T) { checkSeqs(t, got, tt.want, 300) })
		for _, m := range got {
			if m.StreamPos != uint64(2*m.Event.Seq-1) {
				t.Fatalf("%s: seq %d at stream position %d, want %d", tt.name, m.Event.Seq, m.StreamPos, 2*m.Event.Seq-1)
			}
		}
	}
}

// While no consumer can be made (a cluster without its meta leader; here
// the stream allows one consumer and has it), ReadLog reads the whole log
// one message at a time: the stream's leader alone answers that.
func TestReadLogWithoutAConsumer(t *testing.T) {
	t.Parallel()
	b, url := setup(t)
	noConsumers(t, url)
	publishInterleaved(t, b, 150)

	got, err := b.ReadLog(ctxT(t), taskA, task.Position{Attempt: 1, Seq: 10}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, got, 11, 150)
}

// Once a consumer could not be made, reads go straight to gets for a while
// rather than each wait for one: a gateway reads the log for every tab it
// catches up, while a cluster may take seconds to elect a meta leader.
func TestReadLogWithoutAConsumerStopsAsking(t *testing.T) {
	t.Parallel()
	b, url := setup(t)
	noConsumers(t, url)
	publishInterleaved(t, b, 150)

	nc, _ := plainClient(t, url)
	asks, err := nc.SubscribeSync("$JS.API.CONSUMER.CREATE.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := b.ReadLog(ctxT(t), taskA, task.Position{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkSeqs(t, got, 1, 150)
	}
	// The server queued each request to this connection before its answer
	// to the flush's ping.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := asks.Pending(); n != 1 {
		t.Fatalf("3 reads asked for a consumer %d times, want once", n)
	}
}

// Without a consumer, a read of more messages than ReadLog gets one at a
// time fails (and says so) rather than return part of the log.
func TestReadLogWithoutAConsumerIsBounded(t *testing.T) {
	t.Parallel()
	b, url := setup(t)
	noConsumers(t, url)
	p := b.NewPublisher()
	for seq := int64(1); seq <= 4200; seq++ {
		if err := p.Publish(delta(taskA, seq)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadLog(ctxT(t), taskA, task.Position{}, 0); err == nil {
		t.Fatalf("read %d events of 4200 without a consumer, and no error", len(got))
	}
	if got, err := b.ReadLog(ctxT(t), taskA, task.Position{Attempt: 1, Seq: 4190}, 4150); err != nil {
		t.Fatal(err)
	} else {
		checkSeqs(t, got, 4191, 4200)
	}
}

// noConsumers makes TasksStream afresh allowing one consumer, and takes it,
// as a cluster without its meta leader makes none.
func noConsumers(t *testing.T, url string) {
	t.Helper()
	ctx := ctxT(t)
	_, js := plainClient(t, url)
	stream, err := js.Stream(ctx, natsbus.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	if err := js.DeleteStream(ctx, natsbus.TasksStream); err != nil {
		t.Fatal(err)
	}
	cfg.MaxConsumers = 1
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, natsbus.TasksStream, jetstream.ConsumerConfig{Durable: "the-only-one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.OrderedConsumer(ctx, natsbus.TasksStream, jetstream.OrderedConsumerConfig{}); err == nil {
		t.Fatal("a second consumer was made: the test shows nothing")
	}
}
