package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// liveWatch follows a task's events on core NATS, right behind the runner
// (the tabs are a gateway hop further), to time a fault by how far the
// runner got: a fast stream can be over before the tabs show it.
type liveWatch struct {
	nc *nats.Conn

	mu      sync.Mutex
	maxSeq  int64
	changed chan struct{}
}

func watchLive(t testing.TB, natsURL, taskID string) *liveWatch {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.Name("faults live watch"), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("live watch: connect %s: %v", natsURL, err)
	}
	w := &liveWatch{nc: nc, changed: make(chan struct{})}
	_, err = nc.Subscribe(taskPrefix+taskID, func(m *nats.Msg) {
		var e struct {
			Seq int64 `json:"seq"`
		}
		// Of a pack of deltas, one a line, the last is the highest.
		data := m.Data
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		w.mu.Lock()
		if e.Seq > w.maxSeq {
			w.maxSeq = e.Seq
			close(w.changed)
			w.changed = make(chan struct{})
		}
		w.mu.Unlock()
	})
	if err != nil {
		nc.Close()
		t.Fatalf("live watch: subscribe: %v", err)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		t.Fatalf("live watch: flush: %v", err)
	}
	t.Cleanup(nc.Close)
	return w
}

// waitSeq waits until an event with seq >= seq went by.
func (w *liveWatch) waitSeq(seq int64, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		got, ch := w.maxSeq, w.changed
		w.mu.Unlock()
		if got >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("live feed reached seq %d, not %d, within %v", got, seq, timeout)
		}
	}
}

func (w *liveWatch) seq() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxSeq
}
