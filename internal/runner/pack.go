package runner

import (
	"context"
	"time"

	"github.com/tether-dev/tether/internal/task"
)

// Packing: a long answer's deltas come far faster than one log message
// each can be stored (JetStream's cost is per message), so consecutive
// deltas of the attempt that come within Config.PackWindow of the last
// message sent are gathered into one log message, a pack
// (protocol.EncodePack), up to maxPackEvents deltas or maxPackBytes of
// text. A delta that comes after a quiet PackWindow goes out at once, alone:
// a model streaming 30 tokens a second sends one delta per message with no
// delay. A gathered pack goes out when it is full, when a progress or
// status event comes (the pack first, then that event: the order is kept),
// before every cut, and at the latest PackWindow after its first delta.
//
// Every event of the outbox records whether it ends its log message, from
// the moment the message is formed until it is acknowledged. A message
// published again (a lost ack, a NATS outage) is the same range with the
// same bytes and the same message id, so the log's de-duplication drops
// it as a repeat. Events queued while NATS was away are in no message yet;
// republish forms theirs (packing them by the same limits) the first time
// it sends them, and keeps those bounds for every later try.

// Bounds of a pack. 64 deltas of a few bytes each are about 6 KiB of log
// message; the bytes bound keeps a pack of long deltas well under NATS's
// payload limit (a delta longer than it is a message of its own, as every
// delta was before packs).
const (
	maxPackEvents = 64
	maxPackBytes  = 32 << 10
)

// outEvent is an event of the outbox; last marks the last event of its log
// message once that message is formed.
type outEvent struct {
	task.Event
	last bool
}

// queueLocked adds e to the outbox, in no log message yet. a.mu and
// a.pubMu are held.
func (a *attempt) queueLocked(e task.Event) {
	a.unacked = append(a.unacked, outEvent{Event: e})
	a.unackedLen += len(e.Text) + eventOverhead
	a.open++
	if e.Type == task.EventDelta {
		a.openBytes += len(e.Text)
	}
}

// takeLocked decides what of the open events goes out now, after e was
// queued: nothing while the attempt is broken (republish sends it) or
// while a pack is gathering, else the messages to publish on the returned
// publisher. a.mu and a.pubMu are held.
func (a *attempt) takeLocked(e task.Event) (Publisher, [][]task.Event) {
	if a.broken {
		return nil, nil
	}
	if e.Type == task.EventDelta && a.r.cfg.PackWindow > 0 {
		full := a.open >= maxPackEvents || a.openBytes >= maxPackBytes
		quiet := a.open == 1 && time.Since(a.lastSend) >= a.r.cfg.PackWindow
		if !full && !quiet {
			if a.open == 1 {
				a.armPackTimer()
			}
			return nil, nil
		}
	}
	return a.pub, a.closeOpenLocked()
}

// armPackTimer makes sure the pack just started goes out within
// PackWindow even if nothing else comes. a.pubMu is held.
func (a *attempt) armPackTimer() {
	if a.packTimer == nil {
		a.packTimer = time.AfterFunc(a.r.cfg.PackWindow, func() {
			a.pubMu.Lock()
			defer a.pubMu.Unlock()
			a.sendOpen()
		})
		return
	}
	a.packTimer.Reset(a.r.cfg.PackWindow)
}

// stopPackTimer stops the pack timer when the attempt is over.
func (a *attempt) stopPackTimer() {
	a.pubMu.Lock()
	defer a.pubMu.Unlock()
	if a.packTimer != nil {
		a.packTimer.Stop()
	}
}

// sendOpen publishes the pack being gathered, if any: before a cut, and
// when its time is up. When the lease is not held, or the attempt must go
// quiet, it sends nothing and turns the attempt broken: republish sends the
// events under its rules, or nothing does. a.pubMu is held, a.mu is not.
func (a *attempt) sendOpen() {
	a.mu.Lock()
	if a.open == 0 || a.broken {
		a.mu.Unlock()
		return
	}
	if cause := context.Cause(a.ctx); cause != nil && silent(cause) || !a.leaseHeldLocked() {
		a.broken = true
		a.mu.Unlock()
		a.wake()
		return
	}
	pub, msgs := a.pub, a.closeOpenLocked()
	a.mu.Unlock()
	a.send(pub, msgs)
}

// closeOpenLocked forms the log messages of the open events: consecutive
// deltas share one up to the pack bounds (every delta has its own when
// packing is off), any other event has its own. It marks their ends in the
// outbox and returns them. a.mu is held.
func (a *attempt) closeOpenLocked() [][]task.Event {
	if a.open == 0 {
		return nil
	}
	open := a.unacked[len(a.unacked)-a.open:]
	a.open, a.openBytes = 0, 0
	pack := a.r.cfg.PackWindow > 0
	n, bytes := 0, 0
	for i := range open {
		e := &open[i]
		if i > 0 {
			prev := &open[i-1]
			if !pack || e.Type != task.EventDelta || prev.Type != task.EventDelta ||
				n >= maxPackEvents || bytes+len(e.Text) > maxPackBytes {
				prev.last = true
				n, bytes = 0, 0
			}
		}
		n++
		bytes += len(e.Text)
	}
	open[len(open)-1].last = true
	return messagesOf(open)
}

// messagesOf returns the log messages of outbox events, copied, by the
// ends marked in them; trailing events whose message is not complete in
// evs are left out.
func messagesOf(evs []outEvent) [][]task.Event {
	var msgs [][]task.Event
	start := 0
	for i, e := range evs {
		if !e.last {
			continue
		}
		msg := make([]task.Event, i+1-start)
		for j := range msg {
			msg[j] = evs[start+j].Event
		}
		msgs = append(msgs, msg)
		start = i + 1
	}
	return msgs
}

// eventsIn counts the events of msgs.
func eventsIn(msgs [][]task.Event) int {
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	return n
}

// send publishes msgs on pub, in order. A refused publish turns the attempt
// broken, and the rest is left to republish, which sends the same messages.
// a.pubMu is held, a.mu is not.
func (a *attempt) send(pub Publisher, msgs [][]task.Event) {
	for _, msg := range msgs {
		if err := pub.Publish(msg...); err != nil {
			a.log.Warn("publish failed: keeping events until NATS is back", "seq", msg[0].Seq, "err", err)
			a.mu.Lock()
			a.broken = true
			a.mu.Unlock()
			a.wake()
			return
		}
	}
	if len(msgs) > 0 {
		a.lastSend = time.Now()
	}
}
