package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// idleSettle is how long after the last connect the memory is read.
const idleSettle = 3 * time.Second

// idle: many tabs (one user each) that connect and do nothing; then each
// subscribes to a task of its own that sends nothing. Against a bare read
// loop. Each repeat uses fresh processes, so no memory freed by an earlier
// run hides what a tab costs.
func (b *bench) idle(ctx context.Context) error {
	for range b.o.repeats {
		s, err := b.start(ctx, "idle", parts{raw: true})
		if err != nil {
			return err
		}
		ir, err := b.idleOnce(ctx, s)
		s.stop()
		if err != nil {
			return err
		}
		b.logf("   tether idle tab %.1f KiB RSS (%.1f KiB after a GC), %.2f goroutines; subscribed %.1f KiB (%.1f), %.2f goroutines",
			ir.KiB, ir.LiveKiB, ir.Goroutines, ir.SubKiB, ir.SubLiveKiB, ir.SubGoroutines)
		b.logf("   raw    idle connection %.1f KiB RSS (%.1f KiB after a GC), %.2f goroutines", ir.RawKiB, ir.RawLiveKiB, ir.RawGoroutines)
		b.res.Idle = append(b.res.Idle, ir)
	}
	return nil
}

func (b *bench) idleOnce(ctx context.Context, s *system) (idleRun, error) {
	n := b.o.tabs
	users := make([]string, n)
	tasks := make([]string, n)
	// Each user's task, made first over HTTP (nothing runs them).
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		users[i] = token(b.secret, fmt.Sprintf("bench-idle-%d", i))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			tasks[i], errs[i] = postTask(ctx, s.base(), users[i], newID(), "idle")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return idleRun{}, err
		}
	}
	var r idleRun
	liveBefore, err := liveBytes(s.gw.addr("pprof"))
	if err != nil {
		return r, err
	}
	before, gBefore, err := footprint(s.gw.pid(), s.gw.addr("pprof"))
	if err != nil {
		return r, err
	}
	conns, err := dialAll(ctx, n, func(i int) (string, string) { return wsURL(s.gw.addr("http"), "/v1/ws"), users[i] })
	if err != nil {
		return r, err
	}
	defer closeAll(conns)
	time.Sleep(idleSettle)
	after, gAfter, err := footprint(s.gw.pid(), s.gw.addr("pprof"))
	if err != nil {
		return r, err
	}
	r.KiB, r.Goroutines = float64(after-before)/1024/float64(n), float64(gAfter-gBefore)/float64(n)
	liveAfter, err := liveBytes(s.gw.addr("pprof"))
	if err != nil {
		return r, err
	}
	r.LiveKiB = float64(liveAfter-liveBefore) / 1024 / float64(n)

	if b.o.profiles != "" {
		if err := saveURL("http://"+s.gw.addr("pprof")+"/debug/pprof/heap", filepath.Join(b.o.profiles, "idle-heap.pprof")); err != nil {
			return r, err
		}
	}
	// Each tab subscribes to its user's task and waits for the snapshot.
	for i, c := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = subscribeOnce(ctx, c, tasks[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	time.Sleep(idleSettle)
	sub, gSub, err := footprint(s.gw.pid(), s.gw.addr("pprof"))
	if err != nil {
		return r, err
	}
	r.SubKiB, r.SubGoroutines = float64(sub-before)/1024/float64(n), float64(gSub-gBefore)/float64(n)
	liveSub, err := liveBytes(s.gw.addr("pprof"))
	if err != nil {
		return r, err
	}
	r.SubLiveKiB = float64(liveSub-liveBefore) / 1024 / float64(n)
	if b.o.profiles != "" {
		if err := saveURL("http://"+s.gw.addr("pprof")+"/debug/pprof/heap", filepath.Join(b.o.profiles, "idle-subscribed-heap.pprof")); err != nil {
			return r, err
		}
	}

	rawLiveBefore, err := liveBytes(s.raw.addr("pprof"))
	if err != nil {
		return r, err
	}
	rawBefore, rgBefore, err := footprint(s.raw.pid(), s.raw.addr("pprof"))
	if err != nil {
		return r, err
	}
	raws, err := dialAll(ctx, n, func(int) (string, string) { return wsURL(s.raw.addr("http"), "/idle"), "" })
	if err != nil {
		return r, err
	}
	defer closeAll(raws)
	time.Sleep(idleSettle)
	rawAfter, rgAfter, err := footprint(s.raw.pid(), s.raw.addr("pprof"))
	if err != nil {
		return r, err
	}
	r.RawKiB, r.RawGoroutines = float64(rawAfter-rawBefore)/1024/float64(n), float64(rgAfter-rgBefore)/float64(n)
	rawLive, err := liveBytes(s.raw.addr("pprof"))
	if err != nil {
		return r, err
	}
	r.RawLiveKiB = float64(rawLive-rawLiveBefore) / 1024 / float64(n)
	return r, nil
}

// liveBytes forces a GC in the process (through its pprof endpoint) and
// returns its heap in use plus its goroutine stacks: what the connections
// hold, whatever garbage the GC had not collected yet.
func liveBytes(pprofAddr string) (int64, error) {
	resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var heap, stack int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			heap, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "# Stack = "); ok { // "# Stack = inuse / sys"
			inuse, _, _ := strings.Cut(v, " ")
			stack, _ = strconv.ParseInt(inuse, 10, 64)
		}
	}
	if heap == 0 {
		return 0, fmt.Errorf("no MemStats in the heap profile of %s", pprofAddr)
	}
	if os.Getenv("TETHER_BENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "%s: heap %d stack %d\n", pprofAddr, heap, stack)
	}
	return heap + stack, sc.Err()
}

// saveURL saves what url answers to path.
func saveURL(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// footprint is a process's RSS and goroutine count.
func footprint(pid int, pprofAddr string) (int64, int, error) {
	m, err := rss(pid)
	if err != nil {
		return 0, 0, err
	}
	g, err := goroutines(pprofAddr)
	return m, g, err
}

// dialAll opens n connections; each keeps reading (and dropping) what it
// gets, so pings are answered as a browser would.
func dialAll(ctx context.Context, n int, target func(i int) (url, tok string)) ([]*websocket.Conn, error) {
	conns := make([]*websocket.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			url, tok := target(i)
			conns[i], errs[i] = dial(ctx, url, tok)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			closeAll(conns)
			return nil, err
		}
	}
	return conns, nil
}

func closeAll(conns []*websocket.Conn) {
	for _, c := range conns {
		if c != nil {
			_ = c.CloseNow()
		}
	}
}

// subscribeOnce subscribes and reads until the snapshot. The connection is
// read no further: an idle tab's client sends nothing and the server sends
// nothing (the task has no events), so nothing is left unread but pings,
// which the next read would answer.
func subscribeOnce(ctx context.Context, c *websocket.Conn, taskID string) error {
	if err := send(ctx, c, map[string]any{"type": "subscribe", "req": "s", "task_id": taskID}); err != nil {
		return err
	}
	var got bool
	var failed string
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	readFrames(rctx, c, nil, func(msg []byte) bool {
		switch msgType(msg) {
		case "snapshot":
			got = true
			return false
		case "error":
			failed = string(msg)
			return false
		}
		return true
	})
	if !got {
		return fmt.Errorf("no snapshot: %s", failed)
	}
	return nil
}
