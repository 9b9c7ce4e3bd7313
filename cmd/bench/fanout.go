package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/task"
)

// watcher is one tab following one stream: Tether's (a subscribe, then
// events) or the raw broadcast's (a ready frame, then events).
type watcher struct {
	c      *websocket.Conn
	ready  chan struct{}
	last   atomic.Int64 // seq of the last event
	frames atomic.Int64
	gaps   atomic.Int64
	// gone: the connection ended (the server closed it: too slow, a write
	// timed out); the tab is counted as dropped.
	gone atomic.Bool

	mu  sync.Mutex
	rec bool
	lat []time.Duration
}

// audience is many watchers of one stream.
type audience struct {
	ws     []*watcher
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// watch connects n watchers to url. For Tether each subscribes to taskID and
// is ready at its snapshot; for the raw server each is ready at its first
// frame.
func watch(ctx context.Context, n int, url, tok, taskID string) (*audience, error) {
	ctx, cancel := context.WithCancel(ctx)
	a := &audience{ws: make([]*watcher, n), cancel: cancel}
	var (
		errMu    sync.Mutex
		firstErr error
		sem      = make(chan struct{}, 64)
		dialWG   sync.WaitGroup
	)
	for i := range a.ws {
		dialWG.Add(1)
		sem <- struct{}{}
		go func() {
			defer dialWG.Done()
			defer func() { <-sem }()
			c, err := dial(ctx, url, tok)
			if err == nil && taskID != "" {
				err = send(ctx, c, map[string]any{"type": "subscribe", "req": "s", "task_id": taskID})
			}
			if err != nil {
				errMu.Lock()
				firstErr = errors.Join(firstErr, err)
				errMu.Unlock()
				return
			}
			w := &watcher{c: c, ready: make(chan struct{})}
			a.ws[i] = w
			a.wg.Add(1)
			go func() { defer a.wg.Done(); w.read(ctx) }()
		}()
	}
	dialWG.Wait()
	if firstErr != nil {
		a.close()
		return nil, firstErr
	}
	for _, w := range a.ws {
		select {
		case <-w.ready:
		case <-ctx.Done():
			a.close()
			return nil, ctx.Err()
		case <-time.After(60 * time.Second):
			a.close()
			return nil, errors.New("a tab got no snapshot in 60 s")
		}
	}
	return a, nil
}

func (w *watcher) read(ctx context.Context) {
	defer w.gone.Store(true)
	ready := false
	readFrames(ctx, w.c, &w.frames, func(msg []byte) bool {
		switch msgType(msg) {
		case "snapshot", "ready":
			if !ready {
				ready = true
				if s := intField(msg, "seq"); s > 0 {
					w.last.Store(s)
				}
				close(w.ready)
			}
		case "delta":
			seq := intField(msg, "seq")
			last := w.last.Load()
			if seq <= last {
				return true
			}
			if seq != last+1 {
				w.gaps.Add(1)
			}
			w.mu.Lock()
			if w.rec {
				if at, ok := sentAt(msg); ok {
					w.lat = append(w.lat, time.Since(at))
				}
			}
			w.mu.Unlock()
			w.last.Store(seq)
		}
		return true
	})
}

func (a *audience) close() {
	a.cancel()
	for _, w := range a.ws {
		if w != nil {
			_ = w.c.CloseNow()
		}
	}
	a.wg.Wait()
}

// record starts (or stops) latency recording and returns what was recorded.
func (a *audience) record(on bool) []time.Duration {
	var all []time.Duration
	for _, w := range a.ws {
		w.mu.Lock()
		w.rec = on
		all = append(all, w.lat...)
		w.lat = w.lat[:0]
		w.mu.Unlock()
	}
	return all
}

// waitFor waits until every watcher still connected saw seq.
func (a *audience) waitFor(ctx context.Context, seq int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		behind := 0
		for _, w := range a.ws {
			if w.last.Load() < seq && !w.gone.Load() {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d tabs did not reach seq %d in %v", behind, len(a.ws), seq, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (a *audience) frameCount() (n int64) {
	for _, w := range a.ws {
		n += w.frames.Load()
	}
	return n
}

// dropped counts the watchers whose connection ended.
func (a *audience) dropped() (n int) {
	for _, w := range a.ws {
		if w.gone.Load() {
			n++
		}
	}
	return n
}

func (a *audience) gaps() (n int64) {
	for _, w := range a.ws {
		n += w.gaps.Load()
	}
	return n
}

// stream publishes events of taskID, as a runner does (asynchronously,
// flushed every 256), from seq from+1 to to, at rate per second (0: flat out).
func stream(ctx context.Context, bus *natsbus.Bus, taskID string, from, to int64, rate int) error {
	p := bus.NewPublisher()
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
	}
	for seq := from + 1; seq <= to; seq++ {
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		e := task.Event{Type: task.EventDelta, TaskID: taskID, Seq: seq, Attempt: 1, Text: stamp(time.Now())}
		if err := p.Publish(e); err != nil {
			return err
		}
		if seq%256 == 0 || tick != nil {
			if _, err := p.Flush(ctx); err != nil {
				return err
			}
		}
	}
	_, err := p.Flush(ctx)
	return err
}

// side is one of the two things measured against each other.
type side struct {
	name  string
	aud   *audience
	task  string // the task (or raw subject's task id) its events go to
	pid   int
	pprof string
	seq   int64
}

// sides connects n Tether tabs of one user to a pending task and n raw
// clients to a subject of their own.
func (b *bench) sides(ctx context.Context, s *system, n int, user string) (tether, raw *side, err error) {
	tok := token(b.secret, user)
	id, err := postTask(ctx, s.base(), tok, newID(), "fan-out")
	if err != nil {
		return nil, nil, err
	}
	ta, err := watch(ctx, n, wsURL(s.gw.addr("http"), "/v1/ws"), tok, id)
	if err != nil {
		return nil, nil, fmt.Errorf("tether tabs: %w", err)
	}
	rawID := newID()
	ra, err := watch(ctx, n, wsURL(s.raw.addr("http"), "/broadcast?subject="+natsbus.TaskSubject(rawID)), "", "")
	if err != nil {
		ta.close()
		return nil, nil, fmt.Errorf("raw clients: %w", err)
	}
	return &side{name: "tether", aud: ta, task: id, pid: s.gw.pid(), pprof: s.gw.addr("pprof")},
		&side{name: "raw", aud: ra, task: rawID, pid: s.raw.pid(), pprof: s.raw.addr("pprof")}, nil
}

// fanout: one task to many tabs, events published flat out.
func (b *bench) fanout(ctx context.Context) error {
	s, err := b.start(ctx, "fanout", parts{raw: true})
	if err != nil {
		return err
	}
	defer s.stop()
	t, r, err := b.sides(ctx, s, b.o.tabs, "bench-fanout")
	if err != nil {
		return err
	}
	defer t.aud.close()
	defer r.aud.close()
	for rep := range b.o.repeats {
		for _, sd := range []*side{t, r} {
			prof := ""
			if rep == 0 && sd.name == "tether" && b.o.profiles != "" {
				prof = filepath.Join(b.o.profiles, "fanout-gateway.pprof")
			}
			frames0 := framesOf(sd.aud)
			cpu := meter(sd.pid)
			stopProf := startProfile(sd.pprof, prof, 3)
			start := time.Now()
			to := sd.seq + int64(b.o.events)
			if err := stream(ctx, s.bus, sd.task, sd.seq, to, 0); err != nil {
				return err
			}
			if err := sd.aud.waitFor(ctx, to, 2*time.Minute); err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
			elapsed := time.Since(start)
			used := cpu.used()
			stopProf()
			sd.seq = to
			dropped := sd.aud.dropped()
			deliveries := float64(b.o.events) * float64(len(sd.aud.ws)-dropped)
			frames := float64(framesOf(sd.aud) - frames0)
			fr := fanoutRun{Rate: deliveries / elapsed.Seconds(), CPUPerDelivery: us(used) / deliveries,
				PerFrame: deliveries / max(frames, 1), Gaps: sd.aud.gaps(), Dropped: dropped}
			b.logf("   %-6s %d events to %d tabs: %.0f deliveries/s, %.2f µs CPU each, %.1f events a frame, %d tabs dropped",
				sd.name, b.o.events, len(sd.aud.ws), fr.Rate, fr.CPUPerDelivery, fr.PerFrame, dropped)
			if sd.name == "tether" {
				b.res.Fanout.Tether = append(b.res.Fanout.Tether, fr)
			} else {
				b.res.Fanout.Raw = append(b.res.Fanout.Raw, fr)
			}
		}
	}
	return nil
}

// framesOf counts WebSocket frames; watcher.read counts messages, so frames
// are counted here from the connections' own reads.
func framesOf(a *audience) int64 { return a.frameCount() }
