package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// compat: what the encoders of PROTOCOL.md section 11 (internal/compat:
// OpenAI Responses, Chat Completions, the AI SDK's UI message stream) cost
// per delivered event next to Tether's own SSE path of section 5, on the
// same tasks, the same gateway, the same follower. Its baseline is that SSE
// path, not a raw server: the question is what the encoding adds.
//
//   - Live, the honest comparison: an answer paced at a delta a millisecond,
//     read to its end by readers on one path at a time (the gateway's CPU
//     cannot be split between paths that run together), each path delivering
//     every delta as it comes. The gateway's CPU over the run per delivered
//     event, gross and less that of the same answer with no reader. Once,
//     every path at once on one answer, as a check that they coexist.
//   - Fast, once: a long answer at the runner's full speed followed live by a
//     few readers a path, where the cost of an event shows as how fast a
//     path can follow.
//   - Replay: a finished answer read again and again. SSE without
//     Last-Event-ID sends it as the snapshot (the whole text in one event),
//     SSE with Last-Event-ID: 0 as every stored event; each compat path is
//     set against the one it does (the report tells them apart by events an
//     answer), per answer, and per event where events are what is sent.
//   - Resume, once: the first event of a resumed Responses stream
//     (starting_after, a running answer) against a WebSocket resume
//     (subscribe → snapshot) in the same run, interleaved.
func (b *bench) compat(ctx context.Context) error {
	sz := b.o.compatSizes()
	s, err := b.start(ctx, "compat", parts{runner: true})
	if err != nil {
		return err
	}
	defer s.stop()
	c := newCompatClient(s.base(), token(b.secret, "bench-compat"))
	defer c.close()
	res := &b.res.Compat
	prof := func(rep int, what string) string {
		if rep > 0 || b.o.profiles == "" {
			return ""
		}
		return filepath.Join(b.o.profiles, "compat-"+what+"-gateway.pprof")
	}

	// The finished answer of the replays: made through Chat Completions, so
	// that a repeated POST replays it, and followed to its end.
	finished, err := c.create(ctx, sz.replayN, 0, true)
	if err != nil {
		return fmt.Errorf("the answer to replay: %w", err)
	}
	for rep := range b.o.repeats {
		var run compatRun
		// Live: no reader, then each path alone, interleaved.
		for _, path := range []string{"", pathSSE, pathResponses, pathChat, pathUI} {
			var paths []string
			name := "live-none"
			if path != "" {
				paths, name = []string{path}, "live-"+path
			}
			stopProf := startProfile(s.gw.addr("pprof"), prof(rep, name), sz.liveN/1000+1)
			pr, err := b.compatLive(ctx, c, s, sz.liveN, 1, sz.readers, paths)
			stopProf()
			if err != nil {
				return fmt.Errorf("live %s: %w", name, err)
			}
			run.Live = append(run.Live, pr...)
		}
		base := run.Live[0]
		b.logf("   live   no reader: %.0f ms gateway CPU in %.1f s", base.GatewayCPU/1000, base.Seconds)
		for _, pr := range run.Live[1:] {
			b.logf("   live   %-17s %d readers of /stream %d 1: %s events/s delivered, %.0f events a reader, %.2f µs gateway CPU an event (%.2f µs with the answer's own)",
				pathNames[pr.Path], pr.Readers, sz.liveN, num(pr.perSecond()), float64(pr.Events)/float64(pr.Readers),
				pr.netPerEvent(base.GatewayCPU), pr.GatewayCPU/float64(pr.Events))
		}
		// Replay of the finished answer.
		for _, path := range []string{pathSSE, pathSSEEvents, pathResponses, pathChat} {
			stopProf := startProfile(s.gw.addr("pprof"), prof(rep, "replay-"+path), int(sz.replayFor.Seconds()+0.999))
			pr, err := b.compatReplay(ctx, c, s, path, finished, sz)
			stopProf()
			if err != nil {
				return fmt.Errorf("replay %s: %w", path, err)
			}
			b.logf("   replay %-24s %d readers: %.1f answers/s (%s events/s, %.1f MB/s), gateway CPU %.0f µs an answer, %.2f µs a KiB of it, %.2f µs an event",
				pathNames[pr.Path], pr.Readers, float64(pr.Reads)/pr.Seconds, num(pr.perSecond()),
				float64(pr.Bytes)/pr.Seconds/1e6, pr.perAnswer(), pr.perKiB(), pr.GatewayCPU/float64(pr.Events))
			run.Replay = append(run.Replay, pr)
		}
		res.Runs = append(res.Runs, run)
	}

	// Once: every path at once on one live answer (a check that they
	// coexist and each reader gets the whole answer).
	all, err := b.compatLive(ctx, c, s, sz.liveN, 1, sz.readers, []string{pathSSE, pathResponses, pathChat, pathUI})
	if err != nil {
		return fmt.Errorf("live, every path at once: %w", err)
	}
	res.All = &compatAll{Seconds: all[0].Seconds, GatewayCPU: all[0].GatewayCPU, Base: res.Runs[len(res.Runs)-1].Live[0].GatewayCPU}
	for _, pr := range all {
		res.All.Events, res.All.Readers = res.All.Events+pr.Events, res.All.Readers+pr.Readers
	}
	b.logf("   live   every path at once, %d readers: %s events/s, every reader had the whole answer, %.2f µs gateway CPU an event",
		res.All.Readers, num(float64(res.All.Events)/res.All.Seconds), (res.All.GatewayCPU-res.All.Base)/float64(res.All.Events))

	// Once: a fast long answer, on which a path's cost per event shows as
	// how fast its readers can follow. The UI stream is left out: it is
	// served only while the answer runs, and a fast one may have ended by
	// the time a reader asks.
	for _, path := range []string{pathSSE, pathResponses, pathChat} {
		stopProf := startProfile(s.gw.addr("pprof"), prof(0, "fast-"+path), 3)
		pr, err := b.compatLive(ctx, c, s, sz.fastN, 0, sz.fastReaders, []string{path})
		stopProf()
		if err != nil {
			return fmt.Errorf("fast %s: %w", path, err)
		}
		b.logf("   fast   %-17s %d readers of /stream %d 0: %s events/s delivered, %.0f events a reader, %.2f µs gateway CPU an event, in %.1f s",
			pathNames[path], pr[0].Readers, sz.fastN, num(pr[0].perSecond()), float64(pr[0].Events)/float64(pr[0].Readers),
			pr[0].GatewayCPU/float64(pr[0].Events), pr[0].Seconds)
		res.Fast = append(res.Fast, pr[0])
	}

	r, err := b.compatResume(ctx, c, s, sz)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	b.logf("   resume Responses starting_after, first event: p50 %.2f ms, p99 %.2f ms (%d)", r.P50, r.P99, r.N)
	b.logf("   resume WebSocket subscribe → snapshot: p50 %.2f ms, p99 %.2f ms; dial + subscribe → snapshot: p50 %.2f ms, p99 %.2f ms",
		r.WSP50, r.WSP99, r.DialP50, r.DialP99)
	res.Resume = &r
	return nil
}

// compatSizes are the sizes of the compat scenario, chosen to keep it
// about half a minute on two cores.
type compatSizes struct {
	replayN     int           // deltas of the finished answer, /stream N 0 (its events under the gateway's 4,096 of a replay from the first event)
	readers     int           // readers of a replay, and of each path of a live answer
	replayFor   time.Duration // how long each path is replayed, again and again
	liveN       int           // deltas of a live answer, /stream N 1
	fastN       int           // deltas of the fast answer, /stream N 0
	fastReaders int           // its readers on each path
	resumes     int           // resumes of each kind
}

func (o options) compatSizes() compatSizes {
	if o.smoke {
		return compatSizes{replayN: 2000, readers: 4, replayFor: 300 * time.Millisecond, liveN: 300,
			fastN: 2000, fastReaders: 2, resumes: 30}
	}
	return compatSizes{replayN: 3000, readers: 20, replayFor: 300 * time.Millisecond, liveN: 800,
		fastN: 10000, fastReaders: 4, resumes: 120}
}

// compatPathRun is one path's readers over one run.
type compatPathRun struct {
	Path    string
	Readers int
	// Reads are the answers read whole; Events and Bytes what their
	// streams carried; AnswerBytes the answer's bytes among them.
	Reads               int
	Events, Bytes       int64
	AnswerBytes         int64
	Seconds             float64
	GatewayCPU, NATSCPU float64 // µs over the run
}

func (p compatPathRun) perSecond() float64 { return float64(p.Events) / p.Seconds }

// perAnswer is the gateway's CPU an answer read whole, in µs.
func (p compatPathRun) perAnswer() float64 { return p.GatewayCPU / float64(max(p.Reads, 1)) }

// perKiB is the gateway's CPU a KiB of answer delivered, in µs.
func (p compatPathRun) perKiB() float64 { return p.GatewayCPU / (float64(p.AnswerBytes) / 1024) }

// netPerEvent is the gateway's CPU an event delivered, less base (the CPU
// of the same answer with no reader), in µs.
func (p compatPathRun) netPerEvent(base float64) float64 {
	return (p.GatewayCPU - base) / float64(p.Events)
}

// compatAll is the live answer read on every path at once; Base is the
// CPU of one with no reader.
type compatAll struct {
	Readers                   int
	Events                    int64
	Seconds, GatewayCPU, Base float64
}

// compatRun is one repeat: Live[0] is the answer with no reader.
type compatRun struct {
	Live, Replay []compatPathRun
}

// compatResults are the compat scenario's: the repeats, and what is
// measured once.
type compatResults struct {
	Runs   []compatRun
	All    *compatAll
	Fast   []compatPathRun
	Resume *compatResume
}

// compatResume is the first-event latency of resumes, in ms.
type compatResume struct {
	N                                        int
	P50, P99, WSP50, WSP99, DialP50, DialP99 float64
}

// compatLive runs one live answer, /stream n ms, with readers on each of
// paths (none: the answer alone), all opened as soon as it exists, and
// returns each path's figures; Seconds and GatewayCPU are the run's.
func (b *bench) compatLive(ctx context.Context, c *compatClient, s *system, n, ms, readers int, paths []string) ([]compatPathRun, error) {
	gw := meter(s.gw.pid())
	start := time.Now()
	k, err := c.create(ctx, n, ms, false)
	if err != nil {
		return nil, err
	}
	runs := make([]compatPathRun, max(len(paths), 1))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	for i, path := range paths {
		runs[i] = compatPathRun{Path: path, Readers: readers}
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				events, n, err := c.read(ctx, path, k)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = errors.Join(errs, err)
					return
				}
				runs[i].Reads++
				runs[i].Events += events
				runs[i].Bytes += n
				runs[i].AnswerBytes += int64(len(k.want))
			}()
		}
	}
	wg.Wait()
	if errs != nil {
		return nil, errs
	}
	if len(paths) == 0 {
		runs[0].Path = "none"
	}
	// The answer's end: at once when readers followed it to the end.
	if err := waitStatus(ctx, c, k.id, "done", 50*time.Millisecond); err != nil {
		return nil, err
	}
	elapsed, used := time.Since(start).Seconds(), us(gw.used())
	for i := range runs {
		runs[i].Seconds, runs[i].GatewayCPU = elapsed, used
	}
	return runs, nil
}

// waitStatus polls the task until it has status.
func waitStatus(ctx context.Context, c *compatClient, id, status string, every time.Duration) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, _, err := getTask(ctx, c.base, c.tok, id)
		if err == nil && got == status {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s is %q, not %s (%v)", id, got, status, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// compatReplay has sz.readers readers read the finished k over path again
// and again for sz.replayFor.
func (b *bench) compatReplay(ctx context.Context, c *compatClient, s *system, path string, k compatTask, sz compatSizes) (compatPathRun, error) {
	pr := compatPathRun{Path: path, Readers: sz.readers}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	gw, srv := meter(s.gw.pid()), meter(s.nats.pid())
	start := time.Now()
	deadline := start.Add(sz.replayFor)
	for range sz.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				events, n, err := c.read(ctx, path, k)
				mu.Lock()
				if err != nil {
					errs = errors.Join(errs, err)
					mu.Unlock()
					return
				}
				pr.Reads++
				pr.Events += events
				pr.Bytes += n
				pr.AnswerBytes += int64(len(k.want))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	pr.Seconds, pr.GatewayCPU, pr.NATSCPU = time.Since(start).Seconds(), us(gw.used()), us(srv.used())
	return pr, errs
}

// compatResume measures, on a running answer, how long a resumed Responses
// stream takes to its first event and a WebSocket resume to its snapshot,
// one resume at a time, the kinds interleaved so that each sees the same
// answer.
func (b *bench) compatResume(ctx context.Context, c *compatClient, s *system, sz compatSizes) (compatResume, error) {
	// A paced answer, long enough for every resume; cancelled at the end.
	id, err := postTask(ctx, c.base, c.tok, newID(), "/stream 100000 10")
	if err != nil {
		return compatResume{}, err
	}
	k := compatTask{id: id}
	defer cancelTask(c, id)
	if err := waitRunning(ctx, c.base, c.tok, id, 20); err != nil {
		return compatResume{}, err
	}
	// A client that follows it, as the one that is cut would have: the
	// resumes start from the number it last had, some events back.
	follow, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	var latest atomic.Int64
	resp, err := c.open(follow, pathResponses, k, "")
	if err != nil {
		return compatResume{}, err
	}
	go func() {
		defer resp.Body.Close()
		_, _ = readSSE(resp.Body, func(_ string, data []byte) error {
			latest.Store(intField(data, "sequence_number"))
			return nil
		})
	}()
	// The open tab: its subscribe's snapshots are told apart by req.
	url := wsURL(s.gw.addr("http"), "/v1/ws")
	tab, err := dial(ctx, url, c.tok)
	if err != nil {
		return compatResume{}, err
	}
	defer tab.CloseNow()
	snapshots := make(chan string, 16)
	go readFrames(follow, tab, nil, func(msg []byte) bool {
		if msgType(msg) == "snapshot" {
			select {
			case snapshots <- strField(msg, "req"):
			case <-follow.Done():
				return false
			}
		}
		return true
	})
	for latest.Load() < 3+200 {
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return compatResume{}, err
		}
	}
	// A new connection for each resume, as after a cut.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	var resumed, open, dialled []time.Duration
	for i := range sz.resumes {
		// Responses: from about ten deltas back, so there is always an
		// event to send at once (at the live edge the first event would
		// wait for the next delta).
		after := max(3, latest.Load()-64)
		d, err := firstResponsesEvent(ctx, c, fresh, k, after)
		if err != nil {
			return compatResume{}, err
		}
		resumed = append(resumed, d)

		req := "r" + strconv.Itoa(i)
		t0 := time.Now()
		if err := send(ctx, tab, map[string]any{"type": "subscribe", "req": req, "task_id": id}); err != nil {
			return compatResume{}, err
		}
		if err := waitSnapshot(ctx, snapshots, req); err != nil {
			return compatResume{}, err
		}
		open = append(open, time.Since(t0))

		t0 = time.Now()
		if err := dialSubscribe(ctx, url, c.tok, id); err != nil {
			return compatResume{}, err
		}
		dialled = append(dialled, time.Since(t0))
	}
	return compatResume{N: sz.resumes,
		P50: ms(percentile(resumed, 50)), P99: ms(percentile(resumed, 99)),
		WSP50: ms(percentile(open, 50)), WSP99: ms(percentile(open, 99)),
		DialP50: ms(percentile(dialled, 50)), DialP99: ms(percentile(dialled, 99))}, nil
}

// firstResponsesEvent opens GET /v1/responses/{id}?stream=true&starting_after=after
// on a new connection, as a client that was cut does, and returns the time
// to the whole of its first event, which must be a delta after after.
func firstResponsesEvent(ctx context.Context, c *compatClient, fresh *http.Client, k compatTask, after int64) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := c.request(ctx, pathResponses, k, "starting_after="+strconv.FormatInt(after, 10))
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	resp, err := fresh.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("resume: %s", resp.Status)
	}
	var d time.Duration
	var first string
	var seq int64
	_, err = readSSE(resp.Body, func(name string, data []byte) error {
		d, first, seq = time.Since(t0), name, intField(data, "sequence_number")
		return errStop
	})
	if err != nil {
		return 0, err
	}
	if first != "response.output_text.delta" || seq <= after {
		return 0, fmt.Errorf("resume after %d: the first event is %q numbered %d", after, first, seq)
	}
	return d, nil
}

func waitSnapshot(ctx context.Context, snapshots <-chan string, req string) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-snapshots:
			if got == req {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no snapshot for %s in 30 s", req)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dialSubscribe is a tab after F5: a new WebSocket, a subscribe, its snapshot.
func dialSubscribe(ctx context.Context, url, tok, id string) error {
	c, err := dial(ctx, url, tok)
	if err != nil {
		return err
	}
	defer c.Close(websocket.StatusNormalClosure, "")
	if err := send(ctx, c, map[string]any{"type": "subscribe", "req": "s", "task_id": id}); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got := false
	readFrames(rctx, c, nil, func(msg []byte) bool {
		got = msgType(msg) == "snapshot"
		return !got
	})
	if !got {
		return errors.New("no snapshot after a subscribe")
	}
	return nil
}

// cancelTask cancels a task over HTTP, best effort.
func cancelTask(c *compatClient, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/tasks/"+id+"/cancel", nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.tok)
	if resp, err := c.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
