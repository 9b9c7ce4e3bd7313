package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/engine/enginetest"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/task"
)

// nextWithin returns the next message or false when d passes first.
func (tb *tab) nextWithin(d time.Duration) (frame, bool) {
	select {
	case f := <-tb.in:
		return f, true
	case <-time.After(d):
		return frame{}, false
	}
}

// TestTabsDropAndResubscribe: six tabs that each drop and re-subscribe every
// 50-300 ms while a /stream 500 2 runs all end with the exact output, with no
// gap and no repeated seq after any snapshot.
func TestTabsDropAndResubscribe(t *testing.T) {
	t.Parallel()
	e := setup(t)
	taskID, convID := newID(), newID()
	if r := e.dial("erin").submit(taskID, convID, "/stream 500 2"); r.Type != "submitted" {
		t.Fatal(r.raw)
	}
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reconnects := 0
			for {
				tb := e.dial("erin")
				f := &follower{taskID: taskID}
				tb.send(map[string]any{"type": "subscribe", "task_id": taskID, "req": "s"})
				deadline := time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond)
				finished := false
			read:
				for {
					select {
					case m := <-tb.in:
						if m.Type == "error" {
							t.Errorf("tab %d: %s", i, m.raw)
							return
						}
						if f.apply(m) {
							finished = true
							break read
						}
					case <-deadline:
						break read
					case <-tb.done:
						t.Errorf("tab %d closed: %v", i, tb.err)
						return
					}
				}
				_ = tb.c.CloseNow()
				if f.gaps != 0 || f.repeats != 0 {
					t.Errorf("tab %d connection %d: %d gaps, %d repeats", i, reconnects, f.gaps, f.repeats)
				}
				if finished {
					if f.output() != enginetest.StreamText(500) || f.status != "done" {
						t.Errorf("tab %d ended with %q (%s)", i, f.output()[:min(len(f.output()), 40)], f.status)
					}
					return
				}
				reconnects++
			}
		}()
	}
	wg.Wait()
}

// laggingStore returns snapshots that are stale on purpose: Get waits, after
// reading, until the runner has published `ahead` more events, so every
// subscribe meets a snapshot that the live feed has already overtaken.
type laggingStore struct {
	task.Store
	e     *env
	ahead int64
}

func (s laggingStore) Get(ctx context.Context, user, id string) (task.Task, error) {
	t, err := s.Store.Get(ctx, user, id)
	if err != nil || t.Status.Terminal() {
		return t, err
	}
	eventually.True(s.e.t, "the runner to get ahead of the snapshot", func() bool {
		m, ok, err := s.e.bus.LastEvent(ctx, id)
		return err != nil || (ok && (m.Event.Seq >= t.Seq+s.ahead || m.Event.Terminal()))
	})
	return t, nil
}

// TestSubscribeRacesSnapshotWrites forces both halves of the resume race:
// the runner writes no snapshot until the end (so events published before a
// tab attached are only in the log), and every snapshot read is overtaken by
// the live feed before it is sent (so live events overlap the snapshot and
// must be dropped or delivered exactly once).
func TestSubscribeRacesSnapshotWrites(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *envOptions) {
		o.runner.SnapshotInterval = time.Hour
		o.runner.SnapshotEvents = 1 << 30
		o.runner.SnapshotBytes = 1 << 30
		o.wrapStore = func(e *env, s task.Store) task.Store { return laggingStore{Store: s, e: e, ahead: 25} }
	})
	taskID, convID := newID(), newID()
	if r := e.dial("fay").submit(taskID, convID, "/stream 300 3"); r.Type != "submitted" {
		t.Fatal(r.raw)
	}
	// One tab follows to the end while others come and go mid-stream.
	follow := func(events int) *follower {
		tb := e.dial("fay")
		defer tb.c.CloseNow()
		f := &follower{taskID: taskID}
		r := tb.call(map[string]any{"type": "subscribe", "task_id": taskID})
		if r.Type != "snapshot" {
			t.Error(r.raw)
			return f
		}
		done := f.apply(r)
		for n := 0; (events < 0 || n < events) && !done; n++ {
			done = f.apply(tb.next())
		}
		return f
	}
	whole := make(chan *follower, 1)
	go func() { whole <- follow(-1) }()
	rounds := 0
	for ; ; rounds++ {
		f := follow(40)
		if f.gaps != 0 || f.repeats != 0 {
			t.Fatalf("round %d: %d gaps, %d repeats", rounds, f.gaps, f.repeats)
		}
		if !strings.HasPrefix(enginetest.StreamText(300), f.output()) {
			t.Fatalf("round %d: output is not a prefix of the answer: %q", rounds, f.output())
		}
		if isTerminal(f.status) {
			break
		}
	}
	f := <-whole
	if f.output() != enginetest.StreamText(300) || f.gaps != 0 || f.repeats != 0 {
		t.Fatalf("the tab that stayed: %d gaps, %d repeats, output %q", f.gaps, f.repeats, f.output())
	}
	if rounds < 2 {
		t.Fatalf("only %d rounds ran mid-stream; the race was not exercised", rounds)
	}
}

// TestCancelFromSecondTab: a cancel from tab B stops the runner; tab A sees
// the cancelled status and no event after it.
func TestCancelFromSecondTab(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a, b := e.dial("gus"), e.dial("gus")
	taskID, convID := newID(), newID()
	fa := &follower{taskID: taskID}
	fa.apply(a.submit(taskID, convID, "/stream 2000 10"))
	for len(fa.output()) < 20 {
		fa.apply(a.next())
	}
	r := b.call(map[string]any{"type": "cancel", "task_id": taskID})
	if r.Type != "cancelled" || r.Task.Status != "cancelled" {
		t.Fatalf("cancel reply: %s", r.raw)
	}
	for !fa.apply(a.next()) {
	}
	if fa.status != "cancelled" || fa.gaps+fa.repeats != 0 {
		t.Fatalf("tab A: %+v", fa)
	}
	// Nothing of that task may follow its terminal status: a ping's pong
	// arrives after anything the gateway had queued before it.
	pong := a.call(map[string]any{"type": "ping"})
	_ = pong
	for {
		m, ok := a.nextWithin(0)
		if !ok {
			break
		}
		if m.TaskID == taskID {
			t.Fatalf("event after cancelled: %s", m.raw)
		}
	}
	got, err := e.store.Get(t.Context(), "gus", taskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.StatusCancelled || got.Output != fa.output() || got.Seq != fa.seq {
		t.Fatalf("stored %s seq %d output %d bytes; tab saw seq %d, %d bytes", got.Status, got.Seq, len(got.Output), fa.seq, len(fa.output()))
	}
	if strings.Count(got.Output, " ") >= 2000 {
		t.Fatal("the runner did not stop")
	}
}

// TestFailThenRetry: /fail, then the same submit again, runs attempt 2.
func TestFailThenRetry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tb := e.dial("hal")
	taskID, convID := newID(), newID()
	f := &follower{taskID: taskID}
	f.apply(tb.submit(taskID, convID, "/fail 3 0"))
	for !f.apply(tb.next()) {
	}
	if f.status != "failed" || f.attempt != 1 {
		t.Fatalf("first attempt: %+v", f)
	}
	r := tb.submit(taskID, convID, "/fail 3 0")
	if r.Type != "submitted" || *r.Created || r.Task.Attempt != 2 || r.Task.Status != "pending" || *r.Task.Output != "" {
		t.Fatalf("retry: %s", r.raw)
	}
	f.apply(r)
	for !f.apply(tb.next()) {
	}
	if f.status != "failed" || f.attempt != 2 || f.output() != enginetest.StreamText(3) || f.gaps+f.repeats != 0 {
		t.Fatalf("second attempt: %+v", f)
	}
	var errText string
	if err := json.Unmarshal(r.Error, &errText); err == nil && errText != "" {
		t.Fatalf("a retried task carries no error: %s", r.raw)
	}
}

// TestIdleTabSeesTaskEvents: a second tab that follows nothing gets `task`
// events for a submit, a cancel and a finish.
func TestIdleTabSeesTaskEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	idle := e.dial("ivy")
	a := e.dial("ivy")
	long, short, convID := newID(), newID(), newID()
	a.submit(long, convID, "/stream 2000 10")
	seen := func(id, status string) {
		t.Helper()
		m := idle.until(func(m frame) bool {
			return m.Type == "task" && m.Task != nil && m.Task.ID == id && m.Task.Status == status
		})
		// A task event carries no output and no seq of its own (PROTOCOL.md
		// section 4): the task it holds has a seq, but no output.
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(m.field("task"), &inner); err != nil {
			t.Fatalf("task event %s: %v", m.raw, err)
		}
		if m.field("seq") != nil || m.field("task_id") != nil || inner["output"] != nil || inner["seq"] == nil {
			t.Errorf("task event with a seq or task_id of its own, or with output: %s", m.raw)
		}
	}
	seen(long, "pending")
	a.call(map[string]any{"type": "cancel", "task_id": long})
	seen(long, "cancelled")
	a.submit(short, convID, "/stream 2 0")
	seen(short, "pending")
	seen(short, "done")
}

// TestSlowTabClosed1013: a tab that stops reading is closed with 1013 and its
// resubscribe is exact.
func TestSlowTabClosed1013(t *testing.T) {
	t.Parallel()
	// A write timeout longer than the test: the tab must be dropped for its
	// full queue (1013), not for a stalled write, however slow the machine.
	e := setup(t, func(o *envOptions) {
		o.gateway.QueueBytes = 1 << 20
		o.gateway.WriteTimeout = 10 * time.Minute
		o.tinyFirstConn = true
	})
	taskID, convID := newID(), newID()
	start := time.Now()
	slow := e.dialSlow("jo")
	slow.send(map[string]any{"type": "submit", "task_id": taskID, "conversation_id": convID, "content": "/stream 40000 0"})
	// Wait until the gateway gave up on the tab; then read what it sent.
	eventually.True(t, "the gateway to drop the slow tab", func() bool { return e.metric("tether_gateway_queue_drops_total") >= 1 })
	t.Logf("dropped after %v", time.Since(start))
	go slow.read()
	if code := slow.closed(); code != 1013 {
		t.Fatalf("closed with %d, want 1013 (%v)", code, slow.err)
	}
	tb := e.dial("jo")
	f := &follower{taskID: taskID}
	snap := tb.call(map[string]any{"type": "subscribe", "task_id": taskID})
	t.Logf("snapshot seq %d status %s", snap.Task.Seq, snap.Task.Status)
	for done := f.apply(snap); !done; done = f.apply(tb.next()) {
	}
	t.Logf("resubscribed to the end after %v", time.Since(start))
	if f.output() != enginetest.StreamText(40000) || f.gaps+f.repeats != 0 {
		t.Fatalf("resubscribe: %d bytes, %d gaps, %d repeats", len(f.output()), f.gaps, f.repeats)
	}
}

// dialSlow opens a tab that does not read until the test starts its reader.
func (e *env) dialSlow(user string) *tab {
	e.t.Helper()
	tb, _, err := e.connectWith(e.wsURL(), http.Header{"Authorization": {"Bearer " + e.token(user, time.Hour)}}, tinyReadClient)
	if err != nil {
		e.t.Fatal(err)
	}
	return tb
}

// metric reads one unlabelled series from /metrics.
func (e *env) metric(name string) float64 {
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	typ, id string
	data    frame
}

func (e *env) sse(taskID, user, lastID string) (<-chan sseEvent, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/tasks/"+taskID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+e.token(user, time.Hour))
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		e.t.Fatalf("SSE status %d", resp.StatusCode)
	}
	out := make(chan sseEvent, 1<<14)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				if err != io.EOF && ctx.Err() == nil {
					e.t.Errorf("sse read: %v", err)
				}
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.typ != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.data)
				ev.data.raw = line[6:]
			}
		}
	}()
	return out, cancel
}

// TestSSEResume: SSE starts with a snapshot, Last-Event-ID continues exactly
// after that seq, and the stream ends after the terminal status.
func TestSSEResume(t *testing.T) {
	t.Parallel()
	e := setup(t)
	taskID, convID := newID(), newID()
	code, _ := e.httpDo("POST", "/v1/tasks", "kim", map[string]any{"task_id": taskID, "conversation_id": convID, "content": "/stream 60 10"})
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/tasks: %d", code)
	}
	evs, stop := e.sse(taskID, "kim", "")
	first := <-evs
	if first.typ != "snapshot" || first.data.Task == nil {
		t.Fatalf("first SSE event %+v", first)
	}
	f := &follower{taskID: taskID}
	f.apply(first.data)
	for f.seq < 20 {
		ev, ok := <-evs
		if !ok {
			t.Fatal("stream ended early")
		}
		if ev.id != strconv.FormatInt(ev.data.Seq, 10) {
			t.Fatalf("id %s for seq %d", ev.id, ev.data.Seq)
		}
		f.apply(ev.data)
	}
	stop()

	evs, stop = e.sse(taskID, "kim", strconv.FormatInt(f.seq, 10))
	defer stop()
	ev := <-evs
	if ev.typ == "snapshot" || ev.data.Seq != f.seq+1 {
		t.Fatalf("resume did not continue after %d: %+v", f.seq, ev)
	}
	f.apply(ev.data)
	for ev := range evs {
		f.apply(ev.data)
	}
	if f.status != "done" || f.output() != enginetest.StreamText(60) || f.gaps+f.repeats != 0 {
		t.Fatalf("SSE resume: %+v", f)
	}

	// A finished task: a snapshot, then the stream ends.
	evs2, stop2 := e.sse(taskID, "kim", "")
	defer stop2()
	var got []sseEvent
	for ev := range evs2 {
		got = append(got, ev)
	}
	if len(got) != 1 || got[0].typ != "snapshot" || *got[0].data.Task.Output != enginetest.StreamText(60) {
		t.Fatalf("finished task stream: %+v", got)
	}
}
