package task

import "time"

// The defaults of PROTOCOL.md section 3's timings. The store enforces them
// and the runner heart-beats within the lease, so both fill a zero field
// from here, and internal/config declares the settings with the same values.
const (
	// DefaultIdempotencyTTL: how long a finished task's id stays taken.
	DefaultIdempotencyTTL = 24 * time.Hour
	// DefaultPendingTimeout: a task no runner claims this long fails with no_runner.
	DefaultPendingTimeout = 60 * time.Second
	// DefaultLease: a runner that stops heart-beating this long loses its task.
	DefaultLease = 15 * time.Second
	// DefaultMaxAttempts: attempts of one submission before runner_lost.
	DefaultMaxAttempts = 3
)
