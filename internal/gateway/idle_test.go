package gateway_test

import (
	"runtime"
	"testing"

	"github.com/tether-dev/tether/internal/eventually"
)

// An idle tab is one goroutine on the server, parked in its read: the
// worker, the writer and the pinger run only while there is work (a
// request, something to write, a ping due). A tab following a task that
// sends nothing adds none: NATS subscriptions share a few goroutines. (This
// process also holds the clients: one reader goroutine each.)
func TestIdleTabIsOneGoroutine(t *testing.T) {
	e := setup(t, func(o *envOptions) { o.noRunner = true })
	const n = 20
	// A first tab and task make the gateway's shared goroutines (NATS
	// router, pools) before counting.
	e.dial("warm").submit(newID(), newID(), "hi")
	before := runtime.NumGoroutine()
	tabs := make([]*tab, n)
	for i := range tabs {
		tabs[i] = e.dial("idle" + string(rune('a'+i)))
	}
	perTab := func() float64 { return float64(runtime.NumGoroutine()-before) / n }
	// Server and client: at most 1 + 1 a tab once the upgrades are done.
	eventually.True(t, "idle tabs to settle at two goroutines each (server and client)", func() bool { return perTab() <= 2 })

	for i, tb := range tabs {
		id := newID()
		tb.submit(id, newID(), "hello "+string(rune('a'+i)))
	}
	eventually.True(t, "subscribed idle tabs to stay at two goroutines each", func() bool { return perTab() <= 2 })
}
