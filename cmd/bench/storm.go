package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// storm: while a task streams (a real runner, /stream N 100: 10 events a
// second), many tabs connect and subscribe at once, as after a gateway
// restart; each must hold a snapshot and then every event after it, with no
// gap and no repeat. The raw side is a connection and its first frame.
func (b *bench) storm(ctx context.Context) error {
	s, err := b.start(ctx, "storm", parts{runner: true, raw: true})
	if err != nil {
		return err
	}
	defer s.stop()
	tok := token(b.secret, "bench-storm")
	id, err := postTask(ctx, s.base(), tok, newID(), "/stream 100000 100")
	if err != nil {
		return err
	}
	if err := waitRunning(ctx, s.base(), tok, id, 3); err != nil {
		return err
	}
	for rep := range b.o.repeats {
		prof := ""
		if rep == 0 && b.o.profiles != "" {
			prof = filepath.Join(b.o.profiles, "storm-gateway.pprof")
		}
		stopProf := startProfile(s.gw.addr("pprof"), prof, 3)
		st := b.stormOnce(ctx, wsURL(s.gw.addr("http"), "/v1/ws"), tok, id)
		stopProf()
		b.logf("   tether %d tabs: all hold a snapshot in %.2f s (p50 %.0f ms), %d errors, %d gaps, %d repeats",
			b.o.storm, st.All, st.P50, st.Errors, st.Gaps, st.Repeats)
		b.res.Storm.Tether = append(b.res.Storm.Tether, st)
		rt := b.stormOnce(ctx, wsURL(s.raw.addr("http"), "/hello"), "", "")
		b.logf("   raw    %d connections: all hold a first frame in %.2f s (p50 %.0f ms), %d errors",
			b.o.storm, rt.All, rt.P50, rt.Errors)
		b.res.Storm.Raw = append(b.res.Storm.Raw, rt)
	}
	return nil
}

// waitRunning waits until the task runs and has passed seq.
func waitRunning(ctx context.Context, base, tok, id string, seq int64) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, got, err := getTask(ctx, base, tok, id)
		if err == nil && status == "running" && got >= seq {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s not running (status %q, seq %d, %v)", id, status, got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *bench) stormOnce(ctx context.Context, url, tok, taskID string) stormRun {
	n := b.o.storm
	var (
		wg                  sync.WaitGroup
		errs, gaps, repeats atomic.Int64
		mu                  sync.Mutex
		times               []time.Duration
		start               = make(chan struct{})
		allIn               = make(chan struct{})
		snapshots           atomic.Int64
	)
	follow, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	var t0 time.Time
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, err := dial(ctx, url, tok)
			if err != nil {
				errs.Add(1)
				snapshots.Add(1)
				return
			}
			defer c.CloseNow()
			if taskID != "" {
				if err := send(ctx, c, map[string]any{"type": "subscribe", "req": "s", "task_id": taskID}); err != nil {
					errs.Add(1)
					snapshots.Add(1)
					return
				}
			}
			got := false
			last := int64(-1)
			readFrames(follow, c, nil, func(msg []byte) bool {
				typ := msgType(msg)
				switch {
				case !got && (typ == "snapshot" || typ == "hello"):
					got = true
					mu.Lock()
					times = append(times, time.Since(t0))
					mu.Unlock()
					last = intField(msg, "seq")
					if snapshots.Add(1) == int64(n) {
						close(allIn)
					}
					return taskID != "" // the raw side is done at its first frame
				case typ == "error":
					errs.Add(1)
				case got && (typ == "delta" || typ == "progress" || typ == "status"):
					seq := intField(msg, "seq")
					switch {
					case seq <= last:
						repeats.Add(1)
					case seq > last+1:
						gaps.Add(1)
					}
					last = max(last, seq)
				}
				return true
			})
			if !got {
				errs.Add(1)
				if snapshots.Add(1) == int64(n) {
					close(allIn)
				}
			}
		}()
	}
	t0 = time.Now()
	close(start)
	select {
	case <-allIn:
	case <-time.After(2 * time.Minute):
	}
	all := time.Since(t0)
	if taskID != "" {
		// Follow the stream a while longer: every event after each
		// snapshot must arrive once, in order.
		time.Sleep(time.Second)
	}
	stopFollow()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return stormRun{All: all.Seconds(), P50: ms(percentile(times, 50)), Errors: errs.Load(),
		Gaps: gaps.Load(), Repeats: repeats.Load()}
}
