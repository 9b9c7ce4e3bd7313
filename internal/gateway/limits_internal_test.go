package gateway

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func bigEvents(n, size int) []task.Msg {
	data := make([]byte, size)
	out := make([]task.Msg, n)
	for i := range out {
		out[i] = task.Msg{Event: task.Event{Type: task.EventDelta, TaskID: "t", Attempt: 1, Seq: int64(i + 1)}, Data: data}
	}
	return out
}

// A topic's memory of recent events is bounded in bytes as well as in
// count, and stays contiguous.
func TestRecentEventsBoundedInBytes(t *testing.T) {
	var tp topic
	for _, m := range bigEvents(100, 100<<10) {
		tp.remember(m, 4096, 1<<20)
		sum := 0
		for _, r := range tp.recent {
			sum += len(r.Data)
		}
		if sum != tp.recentLen || sum > 1<<20 {
			t.Fatalf("recent holds %d bytes, counted %d, limit %d", sum, tp.recentLen, 1<<20)
		}
	}
	for i, r := range tp.recent {
		if r.Event.Seq != 100-int64(len(tp.recent))+int64(i)+1 {
			t.Fatalf("recent not contiguous up to the last event: %d at %d", r.Event.Seq, i)
		}
	}
}

// A follower that is catching up buffers live events up to a byte limit;
// past it the buffer is dropped (the catch-up resyncs) and counted.
func TestFollowerBufferBoundedInBytes(t *testing.T) {
	h := &hub{metrics: newMetrics(), maxBuffer: 1 << 20}
	f := newFollower(context.Background(), h, "t", nil, nil) // filling: buffers everything
	for _, m := range bigEvents(100, 100<<10) {
		f.onLive(m)
		if f.bufBytes > 1<<20 || f.bufBytes != len(f.buf)*(100<<10) {
			t.Fatalf("buffer holds %d events, %d bytes counted", len(f.buf), f.bufBytes)
		}
	}
	if n := testCount(h.metrics, limitFollowBuffer); n == 0 {
		t.Fatal("dropping the buffer was not counted")
	}
}

func testCount(m *metrics, limit string) float64 {
	mf, _ := m.registry.Gather()
	for _, f := range mf {
		if f.GetName() != "tether_gateway_limit_refusals_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetValue() == limit {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestTabCounter(t *testing.T) {
	c := newTabCounter(2)
	if !c.acquire("a") || !c.acquire("a") || c.acquire("a") || !c.acquire("b") {
		t.Fatal("counts per user up to the limit")
	}
	c.release("a")
	if !c.acquire("a") {
		t.Fatal("a released place is free")
	}
	c.release("a")
	c.release("a")
	c.release("b")
	if len(c.n) != 0 {
		t.Fatalf("users without tabs are forgotten: %v", c.n)
	}
}

// The client's address and scheme come from X-Forwarded-* only when the
// peer is a trusted proxy, and then from the right-most untrusted hop.
func TestClientIPAndTLS(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct {
		peer, xff, xfp string
		ip             string
		tls            bool
	}{
		{"192.0.2.1:1234", "203.0.113.9", "https", "192.0.2.1", false}, // untrusted peer: ignored
		{"10.1.2.3:1234", "203.0.113.9", "https", "203.0.113.9", true}, // trusted proxy
		{"10.1.2.3:1234", "198.51.100.1, 203.0.113.9, 10.9.9.9", "http", "203.0.113.9", false},
		{"10.1.2.3:1234", "", "", "10.1.2.3", false},                            // nothing forwarded
		{"10.1.2.3:1234", "garbage", "https,http", "10.1.2.3", false},           // last proto wins
		{"[::ffff:10.1.2.3]:1234", "203.0.113.9", "HTTPS", "203.0.113.9", true}, // v4-mapped peer
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if c.xfp != "" {
			r.Header.Set("X-Forwarded-Proto", c.xfp)
		}
		if got := clientIP(r, proxies).String(); got != c.ip {
			t.Errorf("%+v: client IP %s", c, got)
		}
		if got := viaTLS(r, proxies); got != c.tls {
			t.Errorf("%+v: TLS %v", c, got)
		}
	}
}
