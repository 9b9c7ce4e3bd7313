package eventually

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTrueReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	n := 0
	True(t, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times", n)
	}
}

func TestWithinSaysWhyItStopped(t *testing.T) {
	t.Parallel()
	if err := Within(time.Second, "at once", func() (bool, error) { return true, nil }); err != nil {
		t.Fatalf("a condition that holds: %v", err)
	}
	broken := errors.New("broken")
	err := Within(time.Minute, "a broken thing", func() (bool, error) { return false, broken })
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "a broken thing") {
		t.Fatalf("a condition that fails: %v", err)
	}
	start := time.Now()
	err = Within(50*time.Millisecond, "never", func() (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "never not reached within 50ms") {
		t.Fatalf("a condition that never holds: %v", err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("gave up before its deadline")
	}
}

func TestReceive(t *testing.T) {
	t.Parallel()
	c := make(chan int, 1)
	go func() { c <- 7 }()
	if got := Receive(t, c, "seven"); got != 7 {
		t.Fatalf("got %d", got)
	}
}
