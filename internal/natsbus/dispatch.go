package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Dispatch asks some runner to run one attempt of a task.
type Dispatch struct {
	TaskID  string `json:"task_id"`
	Attempt int    `json:"attempt"`
	// Deliveries counts how often JetStream has handed this message out,
	// 1 the first time.
	Deliveries uint64 `json:"-"`
}

// Dispatch queues an attempt of a task for the runners. The message id
// task-attempt makes a repeated dispatch of the same attempt within
// dispatchDuplicates a no-op.
func (b *Bus) Dispatch(ctx context.Context, taskID string, attempt int) (err error) {
	defer classify(&err)
	if err := checkToken(taskID); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	data, err := json.Marshal(Dispatch{TaskID: taskID, Attempt: attempt})
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", taskID, err)
	}
	id := taskID + "-" + strconv.Itoa(attempt)
	msg := &nats.Msg{Subject: DispatchSubject, Data: data, Header: injectTrace(ctx, nil)}
	if _, err := b.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("dispatch %s attempt %d: %w", taskID, attempt, err)
	}
	return nil
}

// DispatchAsync is Dispatch without an acknowledgement: the path of a
// submit's reply, which must not wait for a round trip, nor spend one on
// an ack, for what the task does not need (it is safe in Postgres, and
// maintenance dispatches a pending task again if this message is lost). It
// is a core publish that the dispatch stream stores, with the same message
// id as Dispatch's, so a repeat is still dropped. ctx carries only the trace
// context (the span of the submit) to the runner.
func (b *Bus) DispatchAsync(ctx context.Context, taskID string, attempt int) (err error) {
	defer classify(&err)
	if err := checkToken(taskID); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	data, err := json.Marshal(Dispatch{TaskID: taskID, Attempt: attempt})
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", taskID, err)
	}
	msg := &nats.Msg{Subject: DispatchSubject, Data: data,
		Header: injectTrace(ctx, nats.Header{jetstream.MsgIDHeader: {taskID + "-" + strconv.Itoa(attempt)}})}
	if err := b.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("dispatch %s attempt %d: %w", taskID, attempt, err)
	}
	return nil
}

// Handler takes one dispatched task. It claims the task and returns; run,
// when not nil, is the work itself, which Consume runs afterwards in the
// same goroutine while the handler's capacity slot stays taken. Its context
// carries the dispatch's trace context, if it had one (the submit's span).
//
// The dispatch message is acked when the handler returns a nil error: the
// task is claimed, or it is nobody's to run any more (already running,
// finished, cancelled) and the message is spent. A non-nil error means "could
// not decide now" (the store is down): the message is redelivered after a
// short delay, to this runner or another.
type Handler func(ctx context.Context, d Dispatch) (run func(), err error)

// nakDelay is how long a dispatch that a handler could not take waits before
// it is delivered again.
const nakDelay = time.Second

// Consume pulls dispatches and hands each to handle in its own goroutine, at
// most capacity at a time. It pulls one message only when it has a free
// slot, so a busy runner leaves work in the queue for idle ones instead of
// holding it until the ack wait expires.
//
// When ctx is done Consume stops pulling (within Config.FetchWait), then
// waits for the handlers and their run functions and returns nil. Handlers
// get a context that ctx does not cancel: a SIGTERM means "take no new work,
// finish what you have". A run function that must stop sooner watches a
// context of its owner's. Consume returns an error only when it cannot go on
// (the connection is closed).
func (b *Bus) Consume(ctx context.Context, capacity int, handle Handler) error {
	if capacity < 1 {
		return fmt.Errorf("consume dispatches: capacity %d", capacity)
	}
	slots := make(chan struct{}, capacity)
	var wg sync.WaitGroup
	defer wg.Wait()
	work := context.WithoutCancel(ctx)

	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		// Both cases above may be ready at once and select picks at random:
		// never start another (FetchWait long) pull after the stop.
		if ctx.Err() != nil {
			<-slots
			return nil
		}
		msg, err := b.fetchOne()
		if err != nil {
			<-slots
			if errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("consume dispatches: %w", err)
			}
			b.log.Warn("fetch dispatch", "err", err)
			select {
			case <-time.After(nakDelay):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		if msg == nil {
			<-slots
			continue
		}
		if ctx.Err() != nil {
			// Pulled just as we were told to stop: let another runner have it now.
			if err := msg.Nak(); err != nil {
				b.log.Warn("return dispatch", "err", err)
			}
			<-slots
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			b.handleDispatch(work, msg, handle)
		}()
	}
}

// fetchOne pulls at most one dispatch, waiting up to FetchWait; nil, nil
// when none came.
func (b *Bus) fetchOne() (jetstream.Msg, error) {
	batch, err := b.dispatch.Fetch(1, jetstream.FetchMaxWait(b.cfg.FetchWait))
	if err != nil {
		return nil, err
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		if msg != nil {
			return msg, nil
		}
		return nil, err
	}
	return msg, nil
}

// handleDispatch runs one handler and settles its message.
func (b *Bus) handleDispatch(ctx context.Context, msg jetstream.Msg, handle Handler) {
	var d Dispatch
	if err := json.Unmarshal(msg.Data(), &d); err != nil || d.TaskID == "" || d.Attempt < 1 {
		b.log.Warn("dropped a malformed dispatch", "data", string(msg.Data()), "err", err)
		if err := msg.Term(); err != nil {
			b.log.Warn("drop dispatch", "err", err)
		}
		return
	}
	if meta, err := msg.Metadata(); err == nil {
		d.Deliveries = meta.NumDelivered
	}
	run, err := handle(extractTrace(ctx, msg.Headers()), d)
	if err != nil {
		b.log.Warn("dispatch not taken; redelivering", "task", d.TaskID, "attempt", d.Attempt, "err", err)
		if err := msg.NakWithDelay(nakDelay); err != nil {
			b.log.Warn("return dispatch", "task", d.TaskID, "err", err)
		}
		return
	}
	if err := msg.Ack(); err != nil {
		// The message comes back after the ack wait; the next claim finds the
		// task taken and acks it then.
		b.log.Warn("ack dispatch", "task", d.TaskID, "err", err)
	}
	if run != nil {
		run()
	}
}
