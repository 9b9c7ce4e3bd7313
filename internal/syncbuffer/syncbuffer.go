// Package syncbuffer is a bytes.Buffer that a test reads while the code
// under test writes it from other goroutines: a process's stdout, a log.
//
// Tests only (see eventually.TestOnlyTestsImport).
package syncbuffer

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer whose String may be called at any time. The zero
// value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
