package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/task"
)

// Why an attempt's engine was stopped (the cause of its context).
var (
	// errCancel: the user cancelled; the attempt ends as cancelled.
	errCancel = errors.New("cancel requested")
	// errLeaseLapsed: no heartbeat succeeded for a whole lease, so another
	// runner may own the task by now; behave as fenced.
	errLeaseLapsed = errors.New("lease lapsed without a heartbeat")
	// errPublish: an event could not be published or acknowledged. The log
	// may have a hole, so the attempt stops writing and its lease expires:
	// maintenance folds the log and hands the task on.
	errPublish = errors.New("publish failed")
	// errClosed: the engine wrote after the attempt ended.
	errClosed = errors.New("attempt already ended")
)

// silent reports whether an attempt stopped for cause must write and
// publish nothing more.
func silent(cause error) bool {
	return errors.Is(cause, task.ErrFenced) || errors.Is(cause, errLeaseLapsed) ||
		errors.Is(cause, errPublish) || errors.Is(cause, errAbandoned)
}

// historyLimit is how many earlier messages of the conversation an engine
// is given; an engine keeps what fits its own budget.
const historyLimit = 200

// attempt is one run of the engine on a claimed task. It is the engine's
// engine.Output: it numbers and publishes what the engine writes, and its
// snapshotter goroutine writes the batches to Postgres off the engine's path.
type attempt struct {
	r    *Runner
	io   context.Context // store and bus calls; cancelled only on abandon
	ctx  context.Context // the engine's; cancelled with a cause by stop
	stop context.CancelCauseFunc
	log  *slog.Logger
	// full wakes the snapshotter when a batch reached its size limits.
	full chan struct{}

	claimed task.Task

	mu sync.Mutex
	// pub publishes the events since the last cut; each cut gets a new one,
	// so flushing the old one yields exactly the stream position of the
	// cut's last event while the engine goes on publishing.
	pub        Publisher
	closed     bool      // no more engine writes
	seq        int64     // last seq assigned
	storedSeq  int64     // seq of the snapshot in Postgres
	progress   int       // current progress (of the attempt)
	unsaved    []byte    // delta text after storedSeq
	cutN       int       // events since the last cut
	cutBytes   int       // delta bytes since the last cut
	unflushed  int       // events on pub not yet flushed
	cutPos     uint64    // stream position of the last cut's last event
	leaseUntil time.Time // by the runner's clock
	snapshots  int       // SaveSnapshot calls, for the log
}

// maxUnflushed bounds the events in flight without an ack: beyond it the
// engine waits for the acks, so a publisher faster than the server slows
// down instead of overflowing the client's async window.
const maxUnflushed = 2048

func newAttempt(r *Runner, work context.Context, claimed task.Task, log *slog.Logger) *attempt {
	ctx, stop := context.WithCancelCause(work)
	return &attempt{
		r:          r,
		io:         work,
		ctx:        ctx,
		stop:       stop,
		log:        log.With("attempt", claimed.Attempt),
		full:       make(chan struct{}, 1),
		pub:        r.bus.NewPublisher(),
		claimed:    claimed,
		seq:        claimed.Seq,
		storedSeq:  claimed.Seq,
		progress:   claimed.Progress,
		leaseUntil: r.cfg.Now().Add(r.cfg.Lease),
	}
}

// run publishes the running status, runs the engine with the heartbeat and
// the snapshotter alongside, and ends the attempt.
func (a *attempt) run() {
	defer a.stop(nil)
	a.log.Info("attempt started", "seq", a.claimed.Seq)
	// Claim wrote running to Postgres; now the log and the user's tabs.
	a.mu.Lock()
	if err := a.pub.Publish(task.StatusEvent(a.claimed)); err != nil {
		a.stop(fmt.Errorf("%w: running status: %v", errPublish, err))
	}
	a.unflushed++
	a.mu.Unlock()
	a.publishUserTask(a.claimed)

	hbCtx, stopHeartbeat := context.WithCancel(a.io)
	heartbeatDone := make(chan struct{})
	go func() { defer close(heartbeatDone); a.heartbeat(hbCtx) }()
	snapCtx, stopSnapshots := context.WithCancel(a.io)
	snapshotterDone := make(chan struct{})
	go func() { defer close(snapshotterDone); a.snapshotter(snapCtx) }()

	var err error
	if a.ctx.Err() == nil {
		in := engine.Input{TaskID: a.claimed.ID, Content: a.claimed.Input}
		in.History, err = a.r.store.Context(a.ctx, a.claimed.ID, historyLimit)
		if err != nil {
			// The engine can still answer the message itself; say so and go on.
			a.log.Warn("conversation context unavailable", "err", err)
		}
		err = a.r.cfg.Engine.Run(a.ctx, in, a)
	}
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	// The snapshotter finishes the batch it is writing, if any; the
	// heartbeat keeps the lease while the attempt ends.
	stopSnapshots()
	<-snapshotterDone
	a.end(err)
	stopHeartbeat()
	<-heartbeatDone
}

// Delta implements engine.Output. Text is made valid UTF-8 without NUL
// (what Postgres text and JSON clients take); an empty delta is dropped.
func (a *attempt) Delta(text string) error {
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "")
	if text == "" {
		return nil
	}
	return a.emit(task.Event{Type: task.EventDelta, Text: text})
}

// Progress implements engine.Output; a value equal to the current one is
// dropped (PROTOCOL.md: progress is sent when it changes), and so is a
// lower one (progress never decreases within an attempt).
func (a *attempt) Progress(percent int, stage string) error {
	percent = min(max(percent, 0), 100)
	return a.emit(task.Event{Type: task.EventProgress, Progress: percent, Stage: stage})
}

// Usage records the model's token counts (engine.UsageRecorder) in the log,
// where an operator can sum them per runner.
func (a *attempt) Usage(promptTokens, completionTokens int) {
	a.log.Info("token usage", "prompt_tokens", promptTokens, "completion_tokens", completionTokens)
}

var _ engine.UsageRecorder = (*attempt)(nil)

// emit numbers e, publishes it asynchronously and adds it to the batch.
func (a *attempt) emit(e task.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errClosed
	}
	if a.ctx.Err() != nil {
		return context.Cause(a.ctx)
	}
	if !a.r.cfg.Now().Before(a.leaseUntil) {
		a.stop(errLeaseLapsed)
		return errLeaseLapsed
	}
	if e.Type == task.EventProgress && e.Progress <= a.progress {
		return nil
	}
	e.TaskID, e.Seq = a.claimed.ID, a.seq+1
	if err := a.pub.Publish(e); err != nil {
		err = fmt.Errorf("%w: seq %d: %v", errPublish, e.Seq, err)
		a.stop(err)
		return err
	}
	a.seq = e.Seq
	a.cutN++
	a.unflushed++
	switch e.Type {
	case task.EventDelta:
		a.unsaved = append(a.unsaved, e.Text...)
		a.cutBytes += len(e.Text)
	case task.EventProgress:
		a.progress = e.Progress
	}
	if a.fullLocked() {
		select {
		case a.full <- struct{}{}:
		default:
		}
	}
	if a.unflushed >= maxUnflushed {
		if _, err := a.pub.Flush(a.io); err != nil {
			err = fmt.Errorf("%w: flush to seq %d: %v", errPublish, a.seq, err)
			a.stop(err)
			return err
		}
		a.unflushed = 0
	}
	return nil
}

// snapshotter writes a snapshot every SnapshotInterval and whenever a batch
// is full, one at a time, until ctx is done. While it waits for acks and
// Postgres the engine goes on publishing, so a slow snapshot write makes
// the next batch bigger instead of slowing the stream.
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
// full (a wake-up sent before the previous cut).
func (a *attempt) snapshot(onlyFull bool) {
	a.mu.Lock()
	if a.closed || a.ctx.Err() != nil || a.seq == a.storedSeq ||
		onlyFull && !a.fullLocked() {
		a.mu.Unlock()
		return
	}
	pub := a.cutLocked()
	sn := a.snapshotLocked()
	a.mu.Unlock()

	pos, err := a.flushCut(pub)
	if err != nil {
		a.stop(fmt.Errorf("%w: flush to seq %d: %v", errPublish, sn.Seq, err))
		return
	}
	sn.StreamPos = pos
	err = a.r.store.SaveSnapshot(a.io, sn)
	switch {
	case errors.Is(err, task.ErrFenced):
		a.log.Warn("attempt fenced out: stopping without further writes", "seq", sn.Seq)
		a.stop(task.ErrFenced)
		return
	case err != nil:
		a.log.Warn("save snapshot, will retry with the next batch", "seq", sn.Seq, "err", err)
		return
	}
	a.mu.Lock()
	a.storedSeq = sn.Seq
	a.unsaved = append(a.unsaved[:0], a.unsaved[len(sn.Append):]...)
	a.snapshots++
	a.mu.Unlock()
}

// fullLocked reports whether the batch reached a size limit. a.mu is held.
func (a *attempt) fullLocked() bool {
	return a.cutN >= a.r.cfg.SnapshotEvents || a.cutBytes >= a.r.cfg.SnapshotBytes
}

// cutLocked ends the current batch: it returns the publisher holding its
// events and gives later events a new one. a.mu is held.
func (a *attempt) cutLocked() Publisher {
	pub := a.pub
	a.pub = a.r.bus.NewPublisher()
	a.cutN, a.cutBytes, a.unflushed = 0, 0, 0
	return pub
}

// flushCut waits for the acks of a cut's publisher and returns the stream
// position of the cut's last event. A publisher with no events belongs to a
// cut with none: its last event is the previous cut's.
func (a *attempt) flushCut(pub Publisher) (uint64, error) {
	pos, err := pub.Flush(a.io)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if pos == 0 {
		pos = a.cutPos
	}
	a.cutPos = pos
	return pos, nil
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

// publishUserTask sends the user's task event; a failure only delays other
// tabs' lists, so it is logged, not fatal.
func (a *attempt) publishUserTask(t task.Task) {
	if err := a.r.bus.PublishUserTask(t.UserID, t); err != nil {
		a.log.Warn("publish user task event", "seq", t.Seq, "status", t.Status, "err", err)
	}
}
