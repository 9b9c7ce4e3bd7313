package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// capacity: how many answers can stream at once. For each N of a rising
// sweep, N answers of /stream K pace (30 tokens/s) run at once through real
// runners, each followed by 2 tabs; a step passes when the p99 latency of a
// delivery is at most capLimit and every tab ends with exactly the answer's
// text. The baseline is the same load through a raw path: this process
// publishes the same events on NATS core at the same pace and the raw
// server's /broadcast forwards them to 2 tabs an answer, nothing stored.
//
// Latency is measured from the publish: an observer in this process holds a
// core subscription to every task subject and notes when each event reaches
// it (the nats-server hands a published event to core subscribers as it
// receives it); a tab's delivery is measured from that moment. The same
// observer times both sides.

// capLimit is the p99 latency a step may not pass.
const capLimit = 200 * time.Millisecond

type capRun struct {
	N         int
	Pass      bool
	Why       string // why a step failed
	P50, P99  float64
	Delivered int64 // live deltas the tabs got
	// CPU a delivered token, µs: the gateway (or raw server), the runner,
	// nats-server and the Postgres cluster's processes.
	GatewayCPU, RunnerCPU, NATSCPU, PostgresCPU float64
	// ClientCPU is this process's: the tabs, the observer and, on the raw
	// side, the producer; it shares the machine with what it measures.
	ClientCPU float64
	// Per answer: Postgres commits, rows written, WAL bytes; JetStream bytes.
	Commits, Rows, WAL, JetStream float64
	// Seconds is the step's length, from before the submits until the last
	// tab has its answer's end; Busy is the share of every core of the
	// machine that was busy meanwhile (this side's processes, this process,
	// and whatever else runs on it), Own the share of the measured processes.
	Seconds, Busy, Own float64
}

// capAnswer is one answer: when the observer saw each of its events.
type capAnswer struct {
	id  string
	mu  sync.Mutex
	obs []int64 // by seq, unix ns; 0: not seen
}

func (a *capAnswer) saw(seq int64, t int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq < 0 || seq > 1<<20 {
		return
	}
	for int64(len(a.obs)) <= seq {
		a.obs = append(a.obs, 0)
	}
	if a.obs[seq] == 0 {
		a.obs[seq] = t
	}
}

func (a *capAnswer) at(seq int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq < 0 || seq >= int64(len(a.obs)) {
		return 0
	}
	return a.obs[seq]
}

// capObserver notes when each event of a registered answer is published.
type capObserver struct {
	nc      *nats.Conn
	mu      sync.Mutex
	answers map[string]*capAnswer
}

func newObserver(natsURL string) (*capObserver, error) {
	nc, err := nats.Connect(natsURL, nats.Name("bench-observer"))
	if err != nil {
		return nil, err
	}
	o := &capObserver{nc: nc, answers: map[string]*capAnswer{}}
	sub, err := nc.Subscribe(natsbus.TaskSubject("*"), func(m *nats.Msg) {
		now := time.Now().UnixNano()
		o.mu.Lock()
		a := o.answers[strings.TrimPrefix(m.Subject, natsbus.TaskSubject(""))]
		o.mu.Unlock()
		if a != nil {
			// A log message is one event or a pack of deltas: each has its own seq.
			_ = protocol.Pieces(m.Data, func(piece []byte) error {
				a.saw(intField(piece, "seq"), now)
				return nil
			})
		}
	})
	if err == nil {
		err = sub.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return o, nil
}

func (o *capObserver) add(id string) *capAnswer {
	a := &capAnswer{id: id}
	o.mu.Lock()
	o.answers[id] = a
	o.mu.Unlock()
	return a
}

func (o *capObserver) forget(as []*capAnswer) {
	o.mu.Lock()
	for _, a := range as {
		delete(o.answers, a.id)
	}
	o.mu.Unlock()
}

// capTab is one tab following one answer to its end.
type capTab struct {
	c       *websocket.Conn
	ans     *capAnswer
	ready   chan struct{} // raw: subscribed
	done    chan struct{}
	endOnce sync.Once
	gone    atomic.Bool
	// Owned by the reading goroutine until done.
	text    []byte
	last    int64
	status  string
	doubled int
	recv    [][2]int64 // seq, unix ns of each live delta
}

func (t *capTab) end() { t.endOnce.Do(func() { close(t.done) }) }

func (t *capTab) read(ctx context.Context) {
	defer t.end()
	defer t.gone.Store(true)
	readOnce := sync.OnceFunc(func() { close(t.ready) })
	readFrames(ctx, t.c, nil, func(msg []byte) bool {
		seq := intField(msg, "seq")
		switch msgType(msg) {
		case "ready":
			readOnce()
		case "snapshot":
			t.text = append(t.text[:0], strField(msg, "output")...)
			t.last, t.status = seq, strField(msg, "status")
			readOnce()
			if task.Status(t.status).Terminal() {
				return false
			}
		case "delta":
			if seq <= t.last {
				t.doubled++
				return true
			}
			t.text = append(t.text, strField(msg, "text")...)
			t.recv = append(t.recv, [2]int64{seq, time.Now().UnixNano()})
			t.last = seq
		case "progress":
			t.last = max(t.last, seq)
		case "status":
			t.last = max(t.last, seq)
			if st := strField(msg, "status"); task.Status(st).Terminal() {
				t.status = st
				return false
			}
		case "error":
			t.status = "error " + string(msg)
			return false
		}
		return true
	})
}

// capExpected is the text of /stream k: "t1 t2 … tk ".
func capExpected(k int) string {
	var b strings.Builder
	for i := 1; i <= k; i++ {
		b.WriteString("t" + strconv.Itoa(i) + " ")
	}
	return b.String()
}

// capacity runs the sweep on both sides, each until a step fails.
func (b *bench) capacity(ctx context.Context) error {
	s, err := b.start(ctx, "capacity", parts{runner: true, raw: true,
		runnerEnv: []string{"TETHER_RUNNER_CONCURRENCY=" + strconv.Itoa(2*b.o.capSteps[len(b.o.capSteps)-1])}})
	if err != nil {
		return err
	}
	defer s.stop()
	obs, err := newObserver(s.natsURL)
	if err != nil {
		return err
	}
	defer obs.nc.Close()
	js, err := jetstream.New(obs.nc)
	if err != nil {
		return err
	}
	db, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	var backend int
	if err := db.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return err
	}
	postmaster := parentPID(backend)
	pub, err := nats.Connect(s.natsURL, nats.Name("bench-raw-producer"))
	if err != nil {
		return err
	}
	defer pub.Close()
	env := capEnv{s: s, obs: obs, js: js, db: db, postmaster: postmaster, pub: pub}

	tetherOn, rawOn := true, true
	for _, n := range b.o.capSteps {
		if !tetherOn && !rawOn {
			break
		}
		if tetherOn {
			r, err := b.capStep(ctx, env, n, false)
			if err != nil {
				return fmt.Errorf("tether at %d: %w", n, err)
			}
			b.logCap("tether", r)
			b.res.Capacity.Tether = append(b.res.Capacity.Tether, r)
			tetherOn = r.Pass
		}
		if rawOn {
			r, err := b.capStep(ctx, env, n, true)
			if err != nil {
				return fmt.Errorf("raw at %d: %w", n, err)
			}
			b.logCap("raw", r)
			b.res.Capacity.Raw = append(b.res.Capacity.Raw, r)
			rawOn = r.Pass
		}
	}
	return nil
}

func (b *bench) logCap(name string, r capRun) {
	verdict := "pass"
	if !r.Pass {
		verdict = "FAIL: " + r.Why
	}
	b.logf("   %-6s %4d answers in %.1f s (machine %.0f%% busy, %.0f%% of it these processes): p50 %.1f ms p99 %.1f ms, %d deltas delivered; CPU a token: server %.1f µs, runner %.1f µs, nats %.1f µs, Postgres %.1f µs, the bench's clients %.1f µs; an answer: %.0f commits, %.0f rows, %.0f KiB WAL, %.0f KiB JetStream; %s",
		name, r.N, r.Seconds, 100*r.Busy, 100*r.Own, r.P50, r.P99, r.Delivered, r.GatewayCPU, r.RunnerCPU, r.NATSCPU, r.PostgresCPU, r.ClientCPU,
		r.Commits, r.Rows, r.WAL/1024, r.JetStream/1024, verdict)
}

type capEnv struct {
	s          *system
	obs        *capObserver
	js         jetstream.JetStream
	db         *pgx.Conn
	postmaster int
	pub        *nats.Conn
}

// capCounters are what a step measures before and after.
type capCounters struct {
	at                      time.Time
	busy, total             int64 // /proc/stat ticks of every core
	gw, runner, nats, self  time.Duration
	pg                      map[int]time.Duration
	commits, rows, wal, jsB int64
}

func (e capEnv) counters(ctx context.Context, raw bool) (capCounters, error) {
	c := capCounters{at: time.Now()}
	c.busy, c.total = machineTicks()
	server := e.s.gw
	if raw {
		server = e.s.raw
	}
	c.gw, _ = cpuTime(server.pid())
	if !raw {
		c.runner, _ = cpuTime(e.s.runner.pid())
	}
	c.nats, _ = cpuTime(e.s.nats.pid())
	c.self, _ = cpuTime(os.Getpid())
	c.pg = clusterCPU(e.postmaster)
	if _, err := e.db.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return c, err
	}
	if err := e.db.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted,
		(pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&c.commits, &c.rows, &c.wal); err != nil {
		return c, err
	}
	st, err := e.js.Stream(ctx, natsbus.TasksStream)
	if err != nil {
		return c, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return c, err
	}
	c.jsB = int64(info.State.Bytes)
	return c, nil
}

// capStep runs n answers at once on one side and measures them.
func (b *bench) capStep(ctx context.Context, e capEnv, n int, raw bool) (capRun, error) {
	k, pace := b.o.capTokens, b.o.capPace
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make([]*capAnswer, n)
	toks := make([]string, n)
	for i := range answers {
		answers[i] = e.obs.add(newID())
		toks[i] = token(b.secret, fmt.Sprintf("bench-capacity-%d-%d", n, i))
	}
	defer e.obs.forget(answers)
	tabs := make([]*capTab, 2*n)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		for _, t := range tabs {
			if t != nil {
				_ = t.c.CloseNow()
			}
		}
		wg.Wait()
	}()
	// Connect every tab first (raw: each subscribes by its URL).
	errs := make([]error, 2*n)
	sem := make(chan struct{}, 64)
	var dialWG sync.WaitGroup
	for i := range tabs {
		dialWG.Add(1)
		sem <- struct{}{}
		go func() {
			defer dialWG.Done()
			defer func() { <-sem }()
			a := answers[i/2]
			url, tok := wsURL(e.s.gw.addr("http"), "/v1/ws"), toks[i/2]
			if raw {
				url, tok = wsURL(e.s.raw.addr("http"), "/broadcast?subject="+natsbus.TaskSubject(a.id)), ""
			}
			c, err := dial(ctx, url, tok)
			if err != nil {
				errs[i] = err
				return
			}
			t := &capTab{c: c, ans: a, ready: make(chan struct{}), done: make(chan struct{})}
			tabs[i] = t
			wg.Add(1)
			go func() { defer wg.Done(); t.read(ctx) }()
		}()
	}
	dialWG.Wait()
	if err := errors.Join(errs...); err != nil {
		return capRun{}, err
	}
	if raw {
		for _, t := range tabs {
			select {
			case <-t.ready:
			case <-time.After(time.Minute):
				return capRun{}, errors.New("a raw tab got no ready frame in a minute")
			}
		}
	}
	before, err := e.counters(ctx, raw)
	if err != nil {
		return capRun{}, err
	}
	stopProfs := func() {}
	if b.o.profiles != "" && !raw {
		secs := max(int((time.Duration(k) * pace).Seconds()), 1)
		g := startProfile(e.s.gw.addr("pprof"), filepath.Join(b.o.profiles, fmt.Sprintf("capacity-%d-gateway.pprof", n)), secs)
		r := startProfile(e.s.runner.addr("pprof"), filepath.Join(b.o.profiles, fmt.Sprintf("capacity-%d-runner.pprof", n)), secs)
		stopProfs = func() { g(); r() }
	}
	content := fmt.Sprintf("/stream %d %d", k, pace.Milliseconds())
	// Start the answers: Tether's through the gateway (then both tabs
	// subscribe), the raw ones as paced publishers.
	var prodWG sync.WaitGroup
	prodErrs := make([]error, n)
	for i, a := range answers {
		prodWG.Add(1)
		sem <- struct{}{}
		go func() {
			defer prodWG.Done()
			if raw {
				<-sem
				prodErrs[i] = produce(ctx, e.pub, a.id, k, pace)
				return
			}
			defer func() { <-sem }()
			if err := postTaskID(ctx, e.s.base(), toks[i], a.id, newID(), content); err != nil {
				prodErrs[i] = err
				return
			}
			for _, t := range tabs[2*i : 2*i+2] {
				if err := send(ctx, t.c, map[string]any{"type": "subscribe", "req": "s", "task_id": a.id}); err != nil {
					prodErrs[i] = err
					return
				}
			}
		}()
	}
	if !raw {
		prodWG.Wait()
	}
	limit := time.Duration(k)*pace*3 + 30*time.Second
	deadline := time.After(limit)
	why := ""
wait:
	for _, t := range tabs {
		select {
		case <-t.done:
		case <-deadline:
			why = fmt.Sprintf("not every tab saw its answer end in %v", limit)
			break wait
		case <-ctx.Done():
			return capRun{}, ctx.Err()
		}
	}
	prodWG.Wait()
	stopProfs()
	if err := errors.Join(prodErrs...); err != nil {
		return capRun{}, err
	}
	// Let Postgres's statistics and the stream catch up.
	time.Sleep(2 * time.Second)
	after, err := e.counters(ctx, raw)
	if err != nil {
		return capRun{}, err
	}
	cancel()
	for _, t := range tabs {
		_ = t.c.CloseNow()
	}
	wg.Wait()

	want := capExpected(k)
	var lat []time.Duration
	r := capRun{N: n}
	var wrong, doubled, unseen int
	for _, t := range tabs {
		if t.status != "done" || string(t.text) != want {
			wrong++
		}
		doubled += t.doubled
		for _, x := range t.recv {
			at := t.ans.at(x[0])
			if at == 0 {
				unseen++
				continue
			}
			lat = append(lat, time.Duration(max(x[1]-at, 0)))
		}
		r.Delivered += int64(len(t.recv))
	}
	r.P50, r.P99 = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	switch {
	case why != "":
	case wrong > 0:
		why = fmt.Sprintf("%d of %d tabs did not end with the answer's exact text and done", wrong, len(tabs))
	case doubled > 0:
		why = fmt.Sprintf("%d deltas arrived twice", doubled)
	case r.P99 > ms(capLimit):
		why = fmt.Sprintf("p99 %.0f ms > %v", r.P99, capLimit)
	}
	if unseen > 0 {
		b.logf("   (%d deliveries had no publish time: the observer missed them)", unseen)
	}
	r.Pass, r.Why = why == "", why
	d := float64(max(r.Delivered, 1))
	r.GatewayCPU, r.RunnerCPU = us(after.gw-before.gw)/d, us(after.runner-before.runner)/d
	r.NATSCPU, r.PostgresCPU = us(after.nats-before.nats)/d, us(clusterUsed(before.pg, after.pg))/d
	r.ClientCPU = us(after.self-before.self) / d
	r.Seconds = after.at.Sub(before.at).Seconds()
	if dt := after.total - before.total; dt > 0 {
		r.Busy = float64(after.busy-before.busy) / float64(dt)
		own := (after.gw - before.gw) + (after.runner - before.runner) + (after.nats - before.nats) + clusterUsed(before.pg, after.pg)
		r.Own = own.Seconds() / (r.Seconds * float64(runtime.NumCPU()))
	}
	if !raw {
		r.Commits = float64(after.commits-before.commits) / float64(n)
		r.Rows = float64(after.rows-before.rows) / float64(n)
		r.WAL = float64(after.wal-before.wal) / float64(n)
		r.JetStream = float64(after.jsB-before.jsB) / float64(n)
	}
	return r, nil
}

// machineTicks is the busy and total time of every core, from /proc/stat,
// in ticks.
func machineTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest time is counted in user already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// produce publishes /stream k's events on NATS core at the pace (nothing
// before the first, as the demo engine), then the done status.
func produce(ctx context.Context, nc *nats.Conn, id string, k int, pace time.Duration) error {
	subject := natsbus.TaskSubject(id)
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for i := 1; i <= k; i++ {
		if i > 1 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		e := task.Event{Type: task.EventDelta, TaskID: id, Seq: int64(i), Attempt: 1, Text: "t" + strconv.Itoa(i) + " "}
		if err := nc.Publish(subject, protocol.EncodeEvent(e)); err != nil {
			return err
		}
	}
	e := task.Event{Type: task.EventStatus, TaskID: id, Seq: int64(k + 1), Attempt: 1, Status: task.StatusDone}
	return nc.Publish(subject, protocol.EncodeEvent(e))
}

// postTaskID creates the task id over HTTP.
func postTaskID(ctx context.Context, base, tok, id, conv, content string) error {
	_, err := postTaskWith(ctx, base, tok, id, conv, content)
	return err
}

// parentPID is a process's parent, 0 if unknown.
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// clusterCPU is the CPU of each process of one Postgres cluster: its
// postmaster and every process it started (backends, writers), by PID.
func clusterCPU(postmaster int) map[int]time.Duration {
	cpu := map[int]time.Duration{}
	if postmaster <= 1 {
		return cpu
	}
	if c, err := cpuTime(postmaster); err == nil {
		cpu[postmaster] = c
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentPID(pid) != postmaster {
			continue
		}
		if c, err := cpuTime(pid); err == nil {
			cpu[pid] = c
		}
	}
	return cpu
}

// clusterUsed is the CPU the cluster used between two readings: a process
// that started in between counts whole, one that ended in between takes
// its last share with it (the servers keep their pools open, so few do).
func clusterUsed(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, c := range after {
		d += c - min(before[pid], c)
	}
	return d
}

// capacityOf is the last N of a side's sweep that passed, and its run.
func capacityOf(runs []capRun) (int, capRun) {
	n, at := 0, capRun{}
	for _, r := range runs {
		if !r.Pass {
			break
		}
		n, at = r.N, r
	}
	return n, at
}

// capacityRow is the first row of the table: the figure a deployment is
// sized by.
func (r *results) capacityRow(row func(cells ...string)) {
	if len(r.Capacity.Tether) == 0 {
		return
	}
	o := r.Options
	tn, t := capacityOf(r.Capacity.Tether)
	wn, w := capacityOf(r.Capacity.Raw)
	bound := func(runs []capRun, n int) string {
		if len(runs) > 0 && !runs[len(runs)-1].Pass {
			l := runs[len(runs)-1]
			return fmt.Sprintf("at %d: %s, the machine %.0f%% busy", l.N, l.Why, 100*l.Busy)
		}
		return fmt.Sprintf("every step passed: at least %d", n)
	}
	row(fmt.Sprintf("**capacity**: answers streaming at once, each `/stream %d %d` (%.0f tokens/s) followed by 2 tabs, N rising (%s) until p99 > %v or anything is lost",
		o.capTokens, o.capPace.Milliseconds(), float64(time.Second)/float64(o.capPace), joinInts(o.capSteps), capLimit),
		fmt.Sprintf("**%d answers** (p99 %.1f ms; %s); CPU a delivered token: gateway %.1f µs, runner %.1f µs, nats-server %.1f µs, Postgres %.1f µs; an answer: %.0f Postgres commits, %.0f rows written, %.0f KiB WAL, %.0f KiB JetStream",
			tn, t.P99, bound(r.Capacity.Tether, tn), t.GatewayCPU, t.RunnerCPU, t.NATSCPU, t.PostgresCPU, t.Commits, t.Rows, t.WAL/1024, t.JetStream/1024),
		fmt.Sprintf("NATS core publishes at the same pace, coder/websocket broadcast to the tabs, nothing stored: %d answers (p99 %.1f ms; %s); CPU a token: server %.1f µs, nats-server %.1f µs",
			wn, w.P99, bound(r.Capacity.Raw, wn), w.GatewayCPU, w.NATSCPU),
		"**"+ratio(float64(tn), float64(wn))+"**")
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

const capacityDocs = `- **Capacity**: N answers at once, each ` + "`/stream K 33`" + ` (30 tokens/s, about 13 s) submitted over HTTP by a user
  of its own and run by a real runner (one process, ` + "`TETHER_RUNNER_CONCURRENCY`" + ` twice the largest N, so the
  runner's slots never bound it); both of each answer's tabs connect first and subscribe once it is
  submitted (what came before is in the snapshot). A delivery's latency is measured from its publish:
  an observer in this process holds a core NATS subscription to every task subject and notes when each
  event reaches it, and each tab notes when the event reaches it. At the end every tab must hold
  exactly the answer's text (snapshot plus deltas, none twice) and its done status. A step fails when
  p99 > 200 ms or anything is lost; the capacity is the last N that passed. CPU (from /proc) of the
  gateway, the runner, nats-server and the Postgres cluster (its postmaster and every process it
  started), from before the submits to the last tab's end (so submits, subscribes and snapshots are
  in it), is divided by the deltas delivered live; so is this process's (the tabs, the observer, the
  raw producer), and the share of the whole machine that was busy is logged: the clients and
  whatever else runs share the cores with what is measured. Postgres commits, rows inserted, updated or
  deleted (` + "`pg_stat_database`" + `) and WAL bytes, and the task stream's bytes (JetStream stream info) are read
  before and after each step, per answer. The baseline, interleaved step by step, publishes the same
  events on NATS core at the same pace from this process to the raw server's broadcast (2 tabs an
  answer), nothing stored, timed by the same observer. The sweep runs once, not -repeats times (a
  step is 15 s or more of load), so its figures are one run's and move by a step between runs on a
  busy machine. With -profiles, each Tether step saves CPU profiles of the gateway and the runner
  (` + "`capacity-N-gateway.pprof`" + `).
`

// capacityPlot draws p99 (and p50) latency against answers at once for
// both sides, log scales, with the limit as a line.
func (r *results) capacityPlot() string {
	var ss []plotSeries
	var ns []int
	for _, s := range []struct {
		name, color string
		runs        []capRun
	}{{"Tether", "#1f6feb", r.Capacity.Tether}, {"raw path", "#d1242f", r.Capacity.Raw}} {
		for _, q := range []struct {
			name, dash string
			f          func(capRun) float64
		}{{"p99", "", func(x capRun) float64 { return x.P99 }}, {"p50", "6 4", func(x capRun) float64 { return x.P50 }}} {
			se := plotSeries{name: s.name + " " + q.name, color: s.color, dash: q.dash}
			for _, x := range s.runs {
				se.pts = append(se.pts, [2]float64{float64(x.N), q.f(x)})
				if !slices.Contains(ns, x.N) {
					ns = append(ns, x.N)
				}
			}
			ss = append(ss, se)
		}
	}
	slices.Sort(ns)
	return latencyPlot{
		title: fmt.Sprintf("Latency of a delivery against answers at once (%.0f tokens/s, 2 tabs each)",
			float64(time.Second)/float64(r.Options.capPace)),
		xLabel: "answers streaming at once",
		xs:     ns, series: ss,
		limit: ms(capLimit), limitLabel: fmt.Sprintf("limit %v", capLimit),
	}.svg()
}
