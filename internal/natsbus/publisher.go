package natsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// Publisher publishes one runner's task events asynchronously and checks
// every ack. Waiting for each ack would cap a runner at a few thousand events
// a second; instead Publish returns at once and Flush, called before a
// snapshot is written, waits for all of them. It is safe for concurrent use;
// the stream keeps the order of the Publish calls.
type Publisher struct {
	js jetstream.JetStream
	// stallWait is how long Publish blocks when maxPendingAcks acks are
	// outstanding: back-pressure on an engine faster than the server.
	stallWait time.Duration

	mu sync.Mutex
	// pending holds the acks not yet examined, in publish order.
	pending []jetstream.PubAckFuture
	// lastPos is the stream sequence of the last acked event examined.
	lastPos uint64
	// err is the first failure not yet reported by Flush.
	err error
}

// pruneAt is how many pending acks Publish lets pile up before it drops
// those already resolved, so a long task between flushes stays in bounded
// memory.
const pruneAt = 1024

// NewPublisher returns a Publisher on this Bus's connection.
func (b *Bus) NewPublisher() *Publisher {
	return &Publisher{js: b.js, stallWait: b.cfg.PublishAckTimeout}
}

// Publish sends events to their task's subject as one log message: a
// single event, or a pack of consecutive deltas of one task and attempt
// (protocol.EncodePack). The message id (messageID) makes a retried publish
// of the same message a no-op in the log. It blocks only when the
// connection already has maxPendingAcks acks outstanding. An error here
// means the message did not leave; an error of the server's ack is reported
// by the next Flush.
func (p *Publisher) Publish(events ...task.Event) error {
	msg, id, err := logMessage(events)
	if err != nil {
		return fmt.Errorf("publish event: %w", err)
	}
	fut, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(id), jetstream.WithStallWait(p.stallWait))
	if err != nil {
		return fmt.Errorf("publish event %s: %w", id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, fut)
	if len(p.pending) >= pruneAt {
		p.pruneLocked()
	}
	return nil
}

// logMessage is the log message of events (one event, or a pack) and its
// message id.
func logMessage(events []task.Event) (*nats.Msg, string, error) {
	if len(events) == 0 {
		return nil, "", errors.New("no events")
	}
	if err := checkToken(events[0].TaskID); err != nil {
		return nil, "", err
	}
	return &nats.Msg{Subject: TaskSubject(events[0].TaskID), Data: protocol.EncodePack(events)}, messageID(events), nil
}

// pruneLocked examines the resolved acks at the front of pending.
func (p *Publisher) pruneLocked() {
	n := 0
	for _, fut := range p.pending {
		select {
		case ack := <-fut.Ok():
			p.lastPos = ack.Sequence
		case err := <-fut.Err():
			p.err = cmp.Or(p.err, err)
		default:
			p.pending = append(p.pending[:0], p.pending[n:]...)
			return
		}
		n++
	}
	p.pending = p.pending[:0]
}

// Flush waits until every event published so far is acked and returns the
// stream sequence of the last one (or of the last one flushed before, if
// none was published since). It returns the first failed ack since the last
// Flush, after waiting for all of them; the caller then publishes again from
// its last durable point, and the message ids drop what was stored already.
// Call it from one goroutine at a time.
func (p *Publisher) Flush(ctx context.Context) (lastStreamSeq uint64, err error) {
	return p.flush(ctx, 0)
}

// ErrAckStalled is FlushProgress's failure: no awaited ack came for the
// whole stall.
var ErrAckStalled = errors.New("no acknowledgement came for a while")

// FlushProgress is Flush that gives up when no ack has come for stall
// while some are awaited. A stream without a leader (a NATS node died, the
// cluster is electing) neither stores a publish nor refuses it: its ack
// would only time out, at the publish timeout (seconds). A caller that
// holds everything back until its events are stored (a runner publishing
// its outbox again) finds out sooner and publishes them again; the message
// ids drop what was stored meanwhile. Progress, not total time, is bounded,
// so a long outbox on a slow disk is not cut short.
func (p *Publisher) FlushProgress(ctx context.Context, stall time.Duration) (lastStreamSeq uint64, err error) {
	return p.flush(ctx, stall)
}

// flush is Flush, with FlushProgress's stall when stall > 0.
func (p *Publisher) flush(ctx context.Context, stall time.Duration) (lastStreamSeq uint64, err error) {
	p.mu.Lock()
	waiting := p.pending
	p.pending = nil
	p.mu.Unlock()

	var stalled <-chan time.Time
	var timer *time.Timer
	if stall > 0 {
		timer = time.NewTimer(stall)
		defer timer.Stop()
		stalled = timer.C
	}
	var lastPos uint64
	var firstErr, stopErr error
	done := len(waiting)
wait:
	for i, fut := range waiting {
		select {
		case ack := <-fut.Ok():
			lastPos = ack.Sequence
		case err := <-fut.Err():
			firstErr = cmp.Or(firstErr, err)
		case <-ctx.Done():
			done, stopErr = i, ctx.Err()
			break wait
		case <-stalled:
			done, stopErr = i, fmt.Errorf("%w (%s, %d of %d acknowledged)", ErrAckStalled, stall, i, len(waiting))
			break wait
		}
		if timer != nil {
			timer.Reset(stall)
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if lastPos != 0 {
		p.lastPos = lastPos
	}
	p.err = cmp.Or(p.err, firstErr)
	if done < len(waiting) {
		// Keep what was not examined, in order, for the next Flush.
		p.pending = append(waiting[done:len(waiting):len(waiting)], p.pending...)
		return 0, fmt.Errorf("flush events: %w", stopErr)
	}
	if err := p.err; err != nil {
		p.err = nil
		return 0, fmt.Errorf("flush events: %w", err)
	}
	return p.lastPos, nil
}

// Echo sends a log message again (the events of one earlier Publish, the
// same way) without asking for an acknowledgement: a copy for live
// listeners that missed it (a gateway whose connection had just moved to
// another node), at no cost to the acks Publish waits for. The stream
// stores it if it has a leader and has not stored the message yet; the
// message id drops it as a repeat otherwise. Nothing tells whether it was
// stored: the events stay the caller's to publish until an ack says so.
func (p *Publisher) Echo(events ...task.Event) error {
	msg, id, err := logMessage(events)
	if err != nil {
		return fmt.Errorf("echo event: %w", err)
	}
	msg.Header = nats.Header{}
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if err := p.js.Conn().PublishMsg(msg); err != nil {
		return fmt.Errorf("echo event %s: %w", id, err)
	}
	return nil
}

// PublishEventSync publishes one event and waits for its ack: the path of the
// store-side status events (a cancel of a pending task, a retry, maintenance),
// which are rare and must be in the log before the caller answers.
func (b *Bus) PublishEventSync(ctx context.Context, e task.Event) (streamSeq uint64, err error) {
	defer classify(&err)
	if err := checkToken(e.TaskID); err != nil {
		return 0, fmt.Errorf("publish event: %w", err)
	}
	msg := &nats.Msg{Subject: TaskSubject(e.TaskID), Data: protocol.EncodeEvent(e)}
	ack, err := b.js.PublishMsg(ctx, msg, jetstream.WithMsgID(eventMsgID(e)))
	if err != nil {
		return 0, fmt.Errorf("publish event %s/%d: %w", e.TaskID, e.Seq, err)
	}
	return ack.Sequence, nil
}

// eventMsgID names an event for JetStream's de-duplication: task, attempt
// and seq name one event. The attempt is part of it because a runner that
// lost its lease may still publish a seq the next attempt also uses: with
// task and seq alone, whichever came first would win de-duplication, and a
// stale event could push out the current one.
func eventMsgID(e task.Event) string {
	return e.TaskID + "-" + strconv.Itoa(e.Attempt) + "-" + strconv.FormatInt(e.Seq, 10)
}

// messageID names a log message for de-duplication: eventMsgID of a single
// event (what runners before packs used), task-attempt-first-last of a
// pack. A runner that publishes a message again (after a lost ack or a
// NATS outage) publishes exactly the same range (internal/runner keeps
// each message's bounds in its outbox), so the id drops the repeat. Two
// different ranges never share an id, so a message is never dropped for a
// repeat of another that holds less.
func messageID(events []task.Event) string {
	if len(events) == 1 {
		return eventMsgID(events[0])
	}
	return eventMsgID(events[0]) + "-" + strconv.FormatInt(events[len(events)-1].Seq, 10)
}
