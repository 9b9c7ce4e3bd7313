package natsbus_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

func TestCancels(t *testing.T) {
	t.Parallel()
	gw, url := setup(t)
	runner := connect(t, url)
	got := make(chan string, 4)
	unsub, err := runner.SubscribeCancels(func(_ context.Context, id string) { got <- id })
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{taskA, taskB} {
		if err := gw.RequestCancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := <-got, <-got; a != taskA || b != taskB {
		t.Fatalf("cancels %s, %s", a, b)
	}
	if err := unsub(); err != nil {
		t.Fatal(err)
	}
	if err := gw.RequestCancel(context.Background(), "bad.id"); err == nil {
		t.Fatal("cancel of a dotted id accepted")
	}
}

func TestUserTaskEvents(t *testing.T) {
	t.Parallel()
	gw, url := setup(t)
	other := connect(t, url)
	const user = "alice.smith@example.com *>"
	got := make(chan []byte, 4)
	unsub, err := other.SubscribeUser(user, func(data []byte) { got <- data })
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	strangers := make(chan []byte, 4)
	if _, err := other.SubscribeUser("alice.smith@example.com", func(data []byte) { strangers <- data }); err != nil {
		t.Fatal(err)
	}

	tk := task.Task{ID: taskA, ConversationID: taskB, Status: task.StatusPending, Attempt: 1, Input: "hi",
		Output: "secret", CreatedAt: time.Unix(1, 0).UTC(), UpdatedAt: time.Unix(2, 0).UTC()}
	if err := gw.PublishUserTask(user, tk); err != nil {
		t.Fatal(err)
	}
	// A marker on the stranger's subject, published after: once it arrives,
	// anything meant for the stranger from before has arrived too.
	if err := gw.PublishUserTask("alice.smith@example.com", task.Task{ID: taskB}); err != nil {
		t.Fatal(err)
	}
	if data := <-got; !bytes.Equal(data, protocol.TaskEvent(tk)) {
		t.Fatalf("got %s", data)
	}
	if data := <-strangers; !bytes.Contains(data, []byte(taskB)) {
		t.Fatalf("stranger got %s", data)
	}
	select {
	case data := <-strangers:
		t.Fatalf("stranger got a second event %s", data)
	default:
	}
}

func TestUserSubject(t *testing.T) {
	t.Parallel()
	a, b := natsbus.UserSubject("a.b c"), natsbus.UserSubject("a.b c ")
	if a == b || len(a) != len("tether.user.")+32 || bytes.ContainsAny([]byte(a[len("tether.user."):]), ".*> ") {
		t.Fatalf("subjects %q %q", a, b)
	}
}
