package natsbus_test

import (
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

// An echo reaches the log once: an event the log holds already is dropped
// by its message id, and one it lacks is stored, although nobody waits for
// an ack.
func TestEchoIsStoredOnce(t *testing.T) {
	t.Parallel()
	b, _ := setup(t)
	ctx := ctxT(t)

	p := b.NewPublisher()
	if err := p.Publish(delta(taskA, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{1, 2, 2} {
		if err := p.Echo(delta(taskA, seq)); err != nil {
			t.Fatal(err)
		}
	}
	// A publish with an ack after the echoes: once it is stored, so are they.
	if err := p.Publish(delta(taskA, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.ReadLog(ctx, taskA, task.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, m := range msgs {
		seqs = append(seqs, m.Event.Seq)
	}
	last, ok, err := b.LastEvent(ctx, taskA)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 || last.StreamPos != 3 {
		t.Fatalf("log holds seqs %v, the last at stream position %d; want [1 2 3] in 3 messages", seqs, last.StreamPos)
	}
}
