package runner

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/tracing"
)

// The attempt's publishing path. Events are published asynchronously and
// kept in unacked until the log acknowledges them. A cut (one per snapshot)
// waits for the acknowledgements of the events before it; when one fails,
// or NATS refuses a publish, the attempt turns broken: the engine's new
// events only queue, and republish sends everything unacknowledged again,
// in order, with backoff, until NATS takes it. JetStream's de-duplication
// (the message id names the task, the attempt and the message's range of
// seqs, which stays the same: pack.go) drops what had been stored already. So a
// NATS outage of any length is a pause for the attempt, which only gives up
// when it loses its lease.

// ackedLocked drops the events up to seq from the outbox; pos is the stream
// position of the one at seq (0: unknown, keep the last known). a.mu is held.
func (a *attempt) ackedLocked(seq int64, pos uint64) {
	i := 0
	for i < len(a.unacked) && a.unacked[i].Seq <= seq {
		a.unackedLen -= len(a.unacked[i].Text) + eventOverhead
		i++
	}
	a.unacked = append(a.unacked[:0], a.unacked[i:]...)
	a.open = min(a.open, len(a.unacked))
	if pos != 0 {
		a.cutPos = pos
	}
	a.room.Broadcast()
}

// snapshotter writes a snapshot every SnapshotInterval and whenever a batch
// is full (or a publish failed), one at a time, until ctx is done. While it
// waits for acks and Postgres the engine goes on publishing, so a slow
// snapshot write makes the next batch bigger instead of slowing the stream.
func (a *attempt) snapshotter(ctx context.Context) {
	t := time.NewTicker(a.r.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.snapshot(false)
		case <-a.full:
			a.snapshot(true)
		}
	}
}

// snapshot cuts the batch, waits for its events' acks and writes it. A
// store error other than fencing keeps the text, and the next snapshot
// writes it with whatever came after. onlyFull skips a batch that is not
// full (a wake-up sent before the previous cut). A broken attempt first
// publishes its events again; the next round writes the snapshot.
func (a *attempt) snapshot(onlyFull bool) {
	a.mu.Lock()
	if a.closed || a.ctx.Err() != nil {
		a.mu.Unlock()
		return
	}
	if a.broken {
		a.mu.Unlock()
		_, _ = a.republish()
		return
	}
	if a.seq == a.storedSeq || onlyFull && !a.fullLocked() {
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	pub, sn, ok := a.cut()
	if !ok {
		return
	}

	pos, err := a.flushCut(pub, sn.Seq)
	if err != nil {
		a.log.Warn("events not acknowledged: publishing them again", "seq", sn.Seq, "err", err)
		_, _ = a.republish()
		return
	}
	sn.StreamPos = pos
	// A store that does not answer must not hold the attempt past its lease.
	ctx, cancel := context.WithTimeout(a.io, a.r.cfg.Lease/2)
	ctx, span := a.startSpan(ctx, tracing.SpanSnapshot, tracing.KeySeq.Int64(sn.Seq))
	err = a.r.store.SaveSnapshot(ctx, sn)
	tracing.End(span, err)
	cancel()
	switch {
	case errors.Is(err, task.ErrFenced):
		a.log.Warn("attempt fenced out: stopping without further writes", "seq", sn.Seq)
		a.stop(task.ErrFenced)
		return
	case err != nil:
		// Retried with the next batch, every SnapshotInterval: during an
		// outage, say so once.
		if a.snapshotFailures++; a.snapshotFailures == 1 {
			a.log.Warn("save snapshot, will retry with the next batch", "seq", sn.Seq, "err", err)
		} else {
			a.log.Debug("save snapshot failed again", "seq", sn.Seq, "failures", a.snapshotFailures, "err", err)
		}
		return
	}
	if a.snapshotFailures > 0 {
		a.log.Info("snapshot saved after failures", "seq", sn.Seq, "failures", a.snapshotFailures)
		a.snapshotFailures = 0
	}
	a.mu.Lock()
	a.storedSeq = sn.Seq
	a.unsaved = append(a.unsaved[:0], a.unsaved[len(sn.Append):]...)
	a.snapshots++
	a.mu.Unlock()
}

// cut ends the batch for a snapshot: it returns the publisher holding the
// batch's events and the snapshot of everything after the stored one; ok
// is false when there is nothing to write or the attempt is broken or done.
func (a *attempt) cut() (Publisher, task.Snapshot, bool) {
	a.pubMu.Lock()
	defer a.pubMu.Unlock()
	a.sendOpen() // the cut ends at the end of a log message
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.ctx.Err() != nil || a.broken || a.seq == a.storedSeq {
		return nil, task.Snapshot{}, false
	}
	return a.cutLocked(), a.snapshotLocked(), true
}

// settle makes sure every event queued so far is acknowledged and returns
// the stream position of the last one. The attempt has stopped writing.
func (a *attempt) settle() (uint64, error) {
	a.pubMu.Lock()
	a.sendOpen()
	a.mu.Lock()
	pub := a.cutLocked()
	broken, upTo := a.broken, a.seq
	a.mu.Unlock()
	a.pubMu.Unlock()
	if !broken {
		pos, err := a.flushCut(pub, upTo)
		if err == nil {
			return pos, nil
		}
		a.log.Warn("events not acknowledged: publishing them again", "seq", upTo, "err", err)
	}
	return a.republish()
}

// republish publishes every unacknowledged event again, in order, on a
// fresh publisher, until all are acknowledged, backing off while NATS is
// away. It gives up only when the lease lapses (the attempt then goes
// quiet) or the runner abandons its work.
func (a *attempt) republish() (uint64, error) {
	wait := 100 * time.Millisecond
	for {
		if cause := context.Cause(a.ctx); cause != nil && silent(cause) {
			return 0, notSettled(cause)
		}
		// pubMu: an emit in flight finishes before the attempt turns
		// broken, and none publishes on the old publisher afterwards.
		a.pubMu.Lock()
		a.mu.Lock()
		if !a.leaseHeldLocked() {
			// Paused: nothing may be sent until a heartbeat succeeds again.
			lapsed := a.lapsedLocked()
			a.mu.Unlock()
			a.pubMu.Unlock()
			if lapsed {
				a.log.Warn("lease lapsed while events wait to be published: stopping")
				a.stop(errLeaseLapsed)
				return 0, notSettled(errLeaseLapsed)
			}
			if !sleep(a.io, min(wait, a.r.cfg.Lease/10)) {
				return 0, notSettled(a.io.Err())
			}
			continue
		}
		a.broken = true
		a.closeOpenLocked() // events queued meanwhile: their messages, from now on
		msgs := messagesOf(a.unacked)
		if len(msgs) == 0 {
			a.broken = false
			a.pub = a.r.bus.NewPublisher()
			a.cutN, a.cutBytes = 0, 0
			pos := a.cutPos
			a.mu.Unlock()
			a.pubMu.Unlock()
			return pos, nil
		}
		a.mu.Unlock()
		a.pubMu.Unlock()
		if err := a.io.Err(); err != nil {
			return 0, notSettled(err)
		}

		back := a.r.natsBack()
		pub := a.r.bus.NewPublisher()
		var err error
		for _, msg := range msgs {
			if err = pub.Publish(msg...); err != nil {
				break
			}
		}
		var pos uint64
		if err == nil {
			pos, err = pub.FlushProgress(a.io, ackStall)
		}
		lastMsg := msgs[len(msgs)-1]
		throughSeq := lastMsg[len(lastMsg)-1].Seq
		if err == nil {
			a.mu.Lock()
			a.ackedLocked(throughSeq, pos)
			a.outages++
			a.mu.Unlock()
			a.log.Info("events published again after NATS came back", "events", eventsIn(msgs),
				"messages", len(msgs), "through_seq", throughSeq)
			wait = 100 * time.Millisecond
			continue // publishes what the engine queued meanwhile, or ends
		}
		a.log.Warn("NATS unavailable: keeping events to publish again", "unacked", eventsIn(msgs), "err", err)
		var ok bool
		if wait, ok = retryWait(a.io, wait, back); !ok {
			return 0, notSettled(a.io.Err())
		}
	}
}

// fullLocked reports whether the batch reached a size limit. a.mu is held.
func (a *attempt) fullLocked() bool {
	return a.cutN >= a.r.cfg.SnapshotEvents || a.cutBytes >= a.r.cfg.SnapshotBytes
}

// cutLocked ends the current batch: it returns the publisher holding its
// events and gives later events a new one. a.pubMu and a.mu are held.
func (a *attempt) cutLocked() Publisher {
	pub := a.pub
	a.pub = a.r.bus.NewPublisher()
	a.cutN, a.cutBytes = 0, 0
	return pub
}

// flushCut waits for the acks of a cut's publisher, whose last event has
// seq upTo, and returns that event's stream position. A publisher with no
// events belongs to a cut with none: its last event is the previous cut's.
//
// When the acks stop coming for ackStall (a stream that lost its leader
// drops publishes without refusing them) it publishes the cut's
// unacknowledged events again on a fresh publisher, with backoff, until
// they are stored, while the engine's later events go on reaching the tabs
// live; the message ids drop what was stored already. Each time it also
// echoes the first maxEcho later events, which the stream dropped too: a
// gateway whose connection moved while they went out live gets them then,
// and the log stores them as soon as it has a leader, not a cut later. It
// gives up, and the caller publishes everything again holding new events
// back, when NATS refuses a publish, the attempt is broken or its lease is
// not held.
func (a *attempt) flushCut(pub Publisher, upTo int64) (uint64, error) {
	back := a.r.natsBack()
	pos, err := pub.FlushProgress(a.io, ackStall)
	wait := 100 * time.Millisecond
	for try := 1; err != nil; try++ {
		a.mu.Lock()
		// The cut ends at the end of a message (cut and settle send the
		// open pack first); the later messages whole, the open pack not.
		events := a.unacked
		cut, _ := slices.BinarySearchFunc(events, upTo+1, func(e outEvent, seq int64) int {
			return cmp.Compare(e.Seq, seq)
		})
		msgs, later := messagesOf(events[:cut]), messagesOf(events[cut:min(len(events), cut+maxEcho)])
		ok := !a.broken && a.leaseHeldLocked()
		a.mu.Unlock()
		if !ok || a.io.Err() != nil || len(msgs) == 0 {
			return 0, err
		}
		if try == 1 {
			a.log.Warn("events not acknowledged: publishing them again while the answer goes on",
				"events", eventsIn(msgs), "through_seq", upTo, "err", err)
		}
		if wait, ok = retryWait(a.io, wait, back); !ok {
			return 0, err
		}
		back = a.r.natsBack()
		pub = a.r.bus.NewPublisher()
		for _, msg := range msgs {
			if err := pub.Publish(msg...); err != nil {
				return 0, err
			}
		}
		for _, msg := range later {
			if err := pub.Echo(msg...); err != nil {
				break // only a copy: the events' own cut publishes them
			}
		}
		if pos, err = pub.FlushProgress(a.io, ackStall); err == nil {
			a.log.Info("events acknowledged after publishing them again", "events", eventsIn(msgs),
				"through_seq", upTo, "tries", try)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ackedLocked(upTo, pos)
	return a.cutPos, nil
}

// snapshotLocked is everything after the stored snapshot, up to a.seq,
// without its stream position. a.mu is held.
func (a *attempt) snapshotLocked() task.Snapshot {
	return task.Snapshot{
		TaskID:   a.claimed.ID,
		Attempt:  a.claimed.Attempt,
		FromSeq:  a.storedSeq,
		Seq:      a.seq,
		Append:   string(a.unsaved),
		Progress: a.progress,
	}
}

// ackStall is how long a runner waits for an acknowledgement that does not
// come before it publishes the events again. A stream that lost its leader
// drops publishes without refusing them, and a new leader is elected
// within seconds; the events it dropped are what a gateway that missed
// them live (its own connection moved) reads from the log, and while the
// outbox is published again the engine's new events only queue. So it is
// short, far under the publish timeout. A retry costs little: the message
// ids drop what was stored, and progress, not the total wait, is bounded.
const ackStall = time.Second

// maxEcho bounds the later events a stalled cut echoes on each try (about
// 1 MiB of deltas at most): the ones a moved connection missed are the
// first after the cut.
const maxEcho = 4096

// statusPublishFor bounds how long a status event that is already in
// Postgres (a finish, a restart) is retried while NATS is away. Past it
// the event is only in Postgres: tabs see it on their next snapshot.
const statusPublishFor = 2 * time.Minute

// publishStatus publishes a status event the store already wrote and waits
// for its acknowledgement, retrying with backoff: the event id makes a
// repeat harmless.
func (a *attempt) publishStatus(e task.Event) {
	wait := 100 * time.Millisecond
	deadline := time.Now().Add(statusPublishFor)
	var err error
	for {
		back := a.r.natsBack()
		pub := a.r.bus.NewPublisher()
		if err = pub.Publish(e); err == nil {
			if _, err = pub.FlushProgress(a.io, ackStall); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			break
		}
		a.log.Warn("publish status event, retrying", "seq", e.Seq, "status", e.Status, "err", err)
		var ok bool
		if wait, ok = retryWait(a.io, wait, back); !ok {
			break
		}
	}
	a.log.Error("status event is in Postgres but not in the log", "seq", e.Seq, "status", e.Status, "err", err)
}
