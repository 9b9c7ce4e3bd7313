// Package eventually waits, in tests, for something outside the test's
// control to happen: a row in Postgres, a metric, a line a process prints, a
// value on a channel another goroutine sends. It holds the one deadline that
// says how long "eventually" is, so that no test sleeps to synchronise and
// none chooses a deadline of its own without saying why.
//
// Tests only: TestOnlyTestsImport fails if code that is not a test imports
// it.
package eventually

import (
	"fmt"
	"testing"
	"time"
)

// Deadline is how long a condition may take to hold before the test fails.
// Generous, so a failure means the condition never held: the machines that
// run the tests have two cores shared by Postgres, NATS, the race detector
// and other packages' tests.
const Deadline = 30 * time.Second

// poll is how often a condition is checked.
const poll = 10 * time.Millisecond

// True polls cond until it holds, failing t after Deadline. Call it from the
// test's goroutine (it fails with Fatalf); cond may fail t itself.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if err := Within(Deadline, what, func() (bool, error) { return cond(), nil }); err != nil {
		t.Fatal(err)
	}
}

// Within polls cond until it reports true, returns an error, or timeout
// passes, and says which in its error: for a wait that needs a deadline of
// its own (a process that builds and starts, a cluster that elects a
// leader) or that reports instead of failing a test (a helper called from
// another goroutine).
func Within(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not reached within %v", what, timeout)
		}
		time.Sleep(poll)
	}
}

// Receive returns the next value c delivers, failing t after Deadline.
func Receive[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(Deadline)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", Deadline, what)
		panic("unreachable") // Fatalf does not return
	}
}
