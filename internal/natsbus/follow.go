package natsbus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// SubscribeTask follows taskID's live events with a core NATS subscription:
// JetStream delivers every stored message to core subscribers too, at core
// NATS cost. fn is called in order, one call at a time. A live Msg's Event
// holds what a forwarder needs (protocol.PeekEvent: type, seq, attempt, and
// a status event's status, with TaskID set); the whole event is in Data.
//
// SubscribeTask does not wait for the server: a NATS server handles one
// connection's messages in order, so it has the subscription before anything
// this bus sends afterwards. A snapshot read after SubscribeTask returns,
// followed by a look at the log (ReadLog, LastEvent: requests on this
// connection), or a dispatch sent afterwards, cannot fall into a hole
// between itself and the live feed.
//
// Live delivery is not the log: every publish reaches core subscribers, so an
// event re-published after a lost ack arrives twice (drop seq <= the last one
// seen), and a message lost on the way (a slow subscriber, a reconnect) shows
// up as a seq gap, which the caller fills with ReadLog. When messages were
// dropped on this side (the subscriber fell behind), lost (may be nil) is
// called, in a goroutine of its own, since the lost message may have been the
// last one and no later event would show the gap. Messages that are not
// events are logged and skipped.
func (b *Bus) SubscribeTask(taskID string, fn func(task.Msg), lost func()) (unsubscribe func() error, err error) {
	if err := checkToken(taskID); err != nil {
		return nil, fmt.Errorf("subscribe task: %w", err)
	}
	return b.subscribe(TaskSubject(taskID), func(m *nats.Msg) {
		// A pack is handed on as its events, one call each, in order.
		err := protocol.PeekMessage(m.Data, func(e task.Event, piece []byte) {
			e.TaskID = taskID
			fn(task.Msg{Event: e, Data: piece})
		})
		if err != nil {
			b.log.Warn("dropped a malformed task event", "subject", m.Subject, "err", err)
		}
	}, lost, false)
}

// subscribe makes a core subscription whose messages the router hands to
// handle. With flush it waits for the server to have it.
func (b *Bus) subscribe(subject string, handle func(*nats.Msg), lost func(), flush bool) (_ func() error, err error) {
	defer classify(&err)
	if err := b.connected(); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	sub, err := b.router.subscribe(b.nc, subject, handle, lost)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	if flush {
		// A round trip to the server: after it, the server has processed SUB.
		if err := b.nc.FlushTimeout(b.cfg.ConnectTimeout); err != nil {
			_ = b.router.unsubscribe(sub)
			return nil, fmt.Errorf("subscribe %s: %w", subject, err)
		}
	}
	return func() error { return b.router.unsubscribe(sub) }, nil
}

// logLookupWait bounds each wait of ReadLog: the JetStream API requests (the
// task's last message, each message got by subject), well under the API's
// default 5 s, and each message a consumer reads. They answer in
// milliseconds, or not at all while the stream has no leader or catches up;
// a reader that gets an error retries sooner.
const logLookupWait = 2 * time.Second

// ReadLog reads the first directReads of the task's messages one at a time
// (a get of the next message on the task's subject, which the stream's
// leader answers), and a consumer reads the rest. Most reads are a gap of a
// few events; and a consumer needs the cluster's JetStream meta leader,
// which a NATS node that just died may have been, while a get needs only
// the stream's leader. A consumer is waited for consumerWait (it is made in
// a millisecond when the meta leader is there); when it cannot be made,
// gets go on, up to maxDirectReads in all, and for noConsumersFor every
// read of the bus goes straight to gets: electing a meta leader takes
// seconds, and a gateway catching its tabs up reads the log for each of
// them, some twice.
const (
	directReads    = 16
	maxDirectReads = 4096
	consumerWait   = 500 * time.Millisecond
	noConsumersFor = 5 * time.Second
)

// ReadLog returns the logged events of taskID that sort after the position
// after, in (attempt, seq) order, scanning TasksStream from stream sequence
// fromStreamPos (0: from the task's first message) up to the task's last
// message stored when ReadLog started. An event logged twice (a publish
// retried after the de-duplication window) is returned once. Events of an
// attempt older than after's are not returned; older attempts' events that
// sort after it are, in their place, so a reader applying them with
// task.Position.Step sees a fenced-out runner's late events before the
// start of the attempt that replaced it. Other tasks' messages in between
// are never read: the server looks only at the task's subject.
func (b *Bus) ReadLog(ctx context.Context, taskID string, after task.Position, fromStreamPos uint64) (_ []task.Msg, err error) {
	defer classify(&err)
	if err := checkToken(taskID); err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	subject := TaskSubject(taskID)
	lookup, cancel := context.WithTimeout(ctx, logLookupWait)
	defer cancel()
	last, err := b.tasks.GetLastMsgForSubject(lookup, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log of task %s: last message: %w", taskID, err)
	}
	r := logRead{taskID: taskID, after: after, end: last.Sequence, next: max(fromStreamPos, 1)}
	gets := directReads
	if time.Now().UnixNano() < b.consumersBackAt.Load() {
		gets = maxDirectReads
	}
	if err := r.get(ctx, b.tasks, subject, gets); err != nil {
		return nil, err
	}
	if r.next <= r.end {
		err := r.consume(ctx, b.js, subject)
		var noConsumer errNoConsumer
		switch {
		case errors.As(err, &noConsumer):
			b.consumersBackAt.Store(time.Now().Add(noConsumersFor).UnixNano())
			if err := r.get(ctx, b.tasks, subject, maxDirectReads); err != nil {
				return nil, err
			}
			if r.next <= r.end {
				return nil, fmt.Errorf("read log of task %s: over %d messages and %w", taskID, maxDirectReads, noConsumer.err)
			}
		case err != nil:
			return nil, err
		}
	}
	return inSeqOrder(r.out), nil
}

// logRead is one ReadLog under way: the events kept so far, and the stream
// sequence to read from next, up to end.
type logRead struct {
	taskID    string
	after     task.Position
	end, next uint64
	out       []task.Msg
	gets      int
}

// errNoConsumer is a failure to make the consumer that reads the log.
type errNoConsumer struct{ err error }

func (e errNoConsumer) Error() string { return "no consumer to read the log: " + e.err.Error() }
func (e errNoConsumer) Unwrap() error { return e.err }

// add keeps the events of the log message in data, stored at stream
// sequence pos, that sort after r.after: of a pack that holds r.after, only
// the deltas after it. Every event of a pack has the pack's position.
func (r *logRead) add(data []byte, pos uint64) error {
	err := protocol.Pieces(data, func(piece []byte) error {
		e, err := protocol.DecodeEvent(piece)
		if err != nil {
			return err
		}
		if r.after.Before(task.Position{Attempt: e.Attempt, Seq: e.Seq}) {
			r.out = append(r.out, task.Msg{Event: e, Data: piece, StreamPos: pos})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read log of task %s at %d: %w", r.taskID, pos, err)
	}
	r.next = pos + 1
	return nil
}

// get reads the task's messages one at a time from r.next until r.end, or
// until r.gets reaches limit.
func (r *logRead) get(ctx context.Context, stream jetstream.Stream, subject string, limit int) error {
	for r.next <= r.end && r.gets < limit {
		lookup, cancel := context.WithTimeout(ctx, logLookupWait)
		m, err := stream.GetMsg(lookup, r.next, jetstream.WithGetMsgSubject(subject))
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			r.next = r.end + 1 // none left: the end aged out while we read
			return nil
		}
		if err != nil {
			return fmt.Errorf("read log of task %s at %d: %w", r.taskID, r.next, err)
		}
		r.gets++
		if m.Sequence > r.end {
			r.next = m.Sequence
			return nil
		}
		if err := r.add(m.Data, m.Sequence); err != nil {
			return err
		}
	}
	return nil
}

// consume reads the task's messages from r.next to r.end with an ordered
// consumer filtered on the task's subject.
func (r *logRead) consume(ctx context.Context, js jetstream.JetStream, subject string) error {
	lookup, cancel := context.WithTimeout(ctx, consumerWait)
	defer cancel()
	cons, err := js.OrderedConsumer(lookup, TasksStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    r.next,
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("read log of task %s: %w", r.taskID, ctx.Err())
		}
		return errNoConsumer{err: err}
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return fmt.Errorf("read log of task %s: %w", r.taskID, err)
	}
	defer iter.Stop()
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()

	for {
		m, err := iter.Next(jetstream.NextMaxWait(logLookupWait))
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("read log of task %s: %w", r.taskID, ctx.Err())
			}
			return fmt.Errorf("read log of task %s: %w", r.taskID, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("read log of task %s: %w", r.taskID, err)
		}
		if err := r.add(m.Data(), meta.Sequence.Stream); err != nil {
			return err
		}
		// NumPending 0: the end message itself aged out while we read.
		if meta.Sequence.Stream >= r.end || meta.NumPending == 0 {
			return nil
		}
	}
}

// inSeqOrder sorts by (attempt, seq) and keeps the first of each. Runners
// publish in order, so this only does work when a retried publish landed
// late or a fenced-out runner's events were logged.
func inSeqOrder(ms []task.Msg) []task.Msg {
	pos := func(m task.Msg) task.Position { return task.Position{Attempt: m.Event.Attempt, Seq: m.Event.Seq} }
	slices.SortStableFunc(ms, func(a, b task.Msg) int {
		switch pa, pb := pos(a), pos(b); {
		case pa.Before(pb):
			return -1
		case pb.Before(pa):
			return 1
		}
		return 0
	})
	return slices.CompactFunc(ms, func(a, b task.Msg) bool { return pos(a) == pos(b) })
}

// LastEvent returns the last logged event of taskID; false when the log holds
// none. A runner taking over a task numbers its events after it.
func (b *Bus) LastEvent(ctx context.Context, taskID string) (task.Msg, bool, error) {
	if err := checkToken(taskID); err != nil {
		return task.Msg{}, false, fmt.Errorf("last event: %w", err)
	}
	raw, err := b.tasks.GetLastMsgForSubject(ctx, TaskSubject(taskID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return task.Msg{}, false, nil
	}
	if err != nil {
		return task.Msg{}, false, fmt.Errorf("last event of task %s: %w", taskID, err)
	}
	// Of a pack, its last delta.
	var last task.Msg
	err = protocol.Pieces(raw.Data, func(piece []byte) error {
		e, err := protocol.DecodeEvent(piece)
		last = task.Msg{Event: e, Data: piece, StreamPos: raw.Sequence}
		return err
	})
	if err != nil {
		return task.Msg{}, false, fmt.Errorf("last event of task %s: %w", taskID, err)
	}
	return last, true, nil
}
