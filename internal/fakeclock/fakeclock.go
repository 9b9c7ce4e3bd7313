// Package fakeclock is a clock that moves only when a test moves it: the
// Now of a store, an upload service or a runner under test, so a lease
// expires or an upload goes stale without the test waiting for it.
//
// Tests only (see eventually.TestOnlyTestsImport).
package fakeclock

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use: the code under test reads it from its
// own goroutines while the test advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads start until it is advanced.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time; pass it where the code takes a func() time.Time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
