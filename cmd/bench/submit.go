package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rawInsert is the baseline of a submit: one row, keyed on a client id,
// written with INSERT … ON CONFLICT through pgx.
const rawInsert = `INSERT INTO bench_insert (id, user_id, conversation_id, content, created_at)
	VALUES ($1, $2, $3, $4, now()) ON CONFLICT (id) DO NOTHING`

const submitContent = "a question of average length for a chat"

// submit: a burst of submits at once, and a few clients in a closed loop,
// against the same inserts made straight through pgx.
func (b *bench) submit(ctx context.Context) error {
	s, err := b.start(ctx, "submit", parts{})
	if err != nil {
		return err
	}
	defer s.stop()
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `CREATE TABLE bench_insert (id uuid PRIMARY KEY, user_id text NOT NULL,
		conversation_id uuid NOT NULL, content text NOT NULL, created_at timestamptz NOT NULL)`)
	conn.Close(ctx)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, s.dbURL+"&pool_max_conns=8")
	if err != nil {
		return err
	}
	defer pool.Close()

	url := wsURL(s.gw.addr("http"), "/v1/ws")
	for rep := range b.o.repeats {
		// A burst: every tab sends one submit at the same moment.
		tr, err := b.burstTether(ctx, url, rep)
		if err != nil {
			return err
		}
		// Nothing runs these tasks: take them away, or maintenance would
		// dispatch them again during the next runs (it does so after 5 s).
		if _, err := pool.Exec(ctx, `DELETE FROM tasks`); err != nil {
			return err
		}
		b.logf("   tether %d submits at once: %.0f acks/s, p50 %.0f ms", b.o.burst, tr.Rate, tr.P50)
		b.res.Burst.Tether = append(b.res.Burst.Tether, tr)
		rr := burstRaw(ctx, pool, b.o.burst)
		b.logf("   raw    %d inserts at once (8 connections): %.0f/s, p50 %.0f ms", b.o.burst, rr.Rate, rr.P50)
		b.res.Burst.Raw = append(b.res.Burst.Raw, rr)

		// A closed loop: each client submits, waits for the ack, submits again.
		prof := ""
		if rep == 0 && b.o.profiles != "" {
			prof = filepath.Join(b.o.profiles, "submit-gateway.pprof")
		}
		stopProf := startProfile(s.gw.addr("pprof"), prof, int(b.o.closed.Seconds()+0.999))
		tc, err := b.closedTether(ctx, url, s.gw.pid(), rep)
		stopProf()
		if err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, `DELETE FROM tasks`); err != nil {
			return err
		}
		b.logf("   tether %d clients closed loop: %.0f/s, p50 %.2f ms, p99 %.2f ms, %.3f ms gateway CPU a submit, %.3f ms Postgres CPU",
			b.o.clients, tc.Rate, tc.P50, tc.P99, tc.CPUPerSubmit, tc.PostgresCPU)
		b.res.Closed.Tether = append(b.res.Closed.Tether, tc)
		rc, err := closedRaw(ctx, s.dbURL, b.o.clients, b.o.closed)
		if err != nil {
			return err
		}
		b.logf("   raw    %d connections closed loop: %.0f/s, p50 %.2f ms, p99 %.2f ms, %.3f ms Postgres CPU an insert",
			b.o.clients, rc.Rate, rc.P50, rc.P99, rc.PostgresCPU)
		b.res.Closed.Raw = append(b.res.Closed.Raw, rc)
	}
	return nil
}

// submitter is a tab that submits and reads its acks.
type submitter struct {
	c    *websocket.Conn
	conv string
	n    int
}

func (b *bench) submitters(ctx context.Context, url, prefix string, n int) ([]*submitter, error) {
	out := make([]*submitter, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 64)
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := dial(ctx, url, token(b.secret, fmt.Sprintf("%s-%d", prefix, i)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			out[i] = &submitter{c: c, conv: newID()}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		closeSubmitters(out)
		return nil, firstErr
	}
	return out, nil
}

func closeSubmitters(ss []*submitter) {
	for _, s := range ss {
		if s != nil {
			_ = s.c.CloseNow()
		}
	}
}

// once submits one new task and waits for its ack.
func (s *submitter) once(ctx context.Context) (time.Duration, error) {
	s.n++
	req := fmt.Sprint(s.n)
	start := time.Now()
	if err := send(ctx, s.c, map[string]any{"type": "submit", "req": req, "task_id": newID(),
		"conversation_id": s.conv, "content": submitContent}); err != nil {
		return 0, err
	}
	var took time.Duration
	var failed string
	readFrames(ctx, s.c, nil, func(msg []byte) bool {
		switch msgType(msg) {
		case "submitted":
			if strField(msg, "req") == req {
				took = time.Since(start)
				return false
			}
		case "error":
			failed = string(msg)
			return false
		}
		return true
	})
	if took == 0 {
		return 0, fmt.Errorf("no ack: %s", failed)
	}
	return took, nil
}

func (b *bench) burstTether(ctx context.Context, url string, rep int) (submitRun, error) {
	ss, err := b.submitters(ctx, url, fmt.Sprintf("bench-burst-%d", rep), b.o.burst)
	if err != nil {
		return submitRun{}, err
	}
	defer closeSubmitters(ss)
	time.Sleep(500 * time.Millisecond) // let the connections settle
	lat := make([]time.Duration, len(ss))
	errs := make([]error, len(ss))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			lat[i], errs[i] = s.once(ctx)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return submitRun{}, err
		}
	}
	slowest := percentile(lat, 100)
	return submitRun{Rate: float64(len(ss)) / slowest.Seconds(), P50: ms(percentile(lat, 50)), P99: ms(percentile(lat, 99))}, nil
}

func burstRaw(ctx context.Context, pool *pgxpool.Pool, n int) submitRun {
	lat := make([]time.Duration, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			_, _ = pool.Exec(ctx, rawInsert, newID(), "bench", newID(), submitContent)
			lat[i] = time.Since(t0)
		}()
	}
	close(start)
	wg.Wait()
	slowest := percentile(lat, 100)
	return submitRun{Rate: float64(n) / slowest.Seconds(), P50: ms(percentile(lat, 50)), P99: ms(percentile(lat, 99))}
}

func (b *bench) closedTether(ctx context.Context, url string, gwPid, rep int) (submitRun, error) {
	ss, err := b.submitters(ctx, url, fmt.Sprintf("bench-closed-%d", rep), b.o.clients)
	if err != nil {
		return submitRun{}, err
	}
	defer closeSubmitters(ss)
	// Warm up: the first submits prepare statements and fill pools.
	for _, s := range ss {
		for range 20 {
			if _, err := s.once(ctx); err != nil {
				return submitRun{}, err
			}
		}
	}
	cpu, pg := meter(gwPid), postgresCPU()
	lats := make([][]time.Duration, len(ss))
	errs := make([]error, len(ss))
	deadline := time.Now().Add(b.o.closed)
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				d, err := s.once(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				lats[i] = append(lats[i], d)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	used, pgUsed := cpu.used(), postgresCPU()-pg
	var all []time.Duration
	for i, l := range lats {
		if errs[i] != nil {
			return submitRun{}, errs[i]
		}
		all = append(all, l...)
	}
	return submitRun{Rate: float64(len(all)) / elapsed.Seconds(), P50: ms(percentile(all, 50)),
		P99: ms(percentile(all, 99)), CPUPerSubmit: ms(used) / float64(len(all)),
		PostgresCPU: ms(pgUsed) / float64(len(all))}, nil
}

func closedRaw(ctx context.Context, dbURL string, clients int, d time.Duration) (submitRun, error) {
	conns := make([]*pgx.Conn, clients)
	for i := range conns {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return submitRun{}, err
		}
		defer c.Close(ctx)
		conns[i] = c
		for range 20 {
			if _, err := c.Exec(ctx, rawInsert, newID(), "bench", newID(), submitContent); err != nil {
				return submitRun{}, err
			}
		}
	}
	lats := make([][]time.Duration, clients)
	pg := postgresCPU()
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if _, err := c.Exec(ctx, rawInsert, newID(), "bench", newID(), submitContent); err != nil {
					return
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	pgUsed := postgresCPU() - pg
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return submitRun{Rate: float64(len(all)) / elapsed.Seconds(), P50: ms(percentile(all, 50)), P99: ms(percentile(all, 99)),
		PostgresCPU: ms(pgUsed) / float64(len(all))}, nil
}
