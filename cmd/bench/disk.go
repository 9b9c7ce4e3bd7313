package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// diskContent is each task of the disk run: an answer of 200 deltas, about
// 300 events with its progress and status events.
const diskContent = "/stream 200 1"

// diskGrace is TETHER_LOG_GRACE in the disk run: short, so the run shows
// what stays once finished tasks' events are purged.
const diskGrace = 2 * time.Second

// diskUse: what the JetStream log keeps on disk per 1,000 finished tasks,
// right after they finish and once the grace for late resumers has passed.
func (b *bench) diskUse(ctx context.Context) error {
	s, err := b.start(ctx, "disk", parts{runner: true, env: []string{"TETHER_LOG_GRACE=" + diskGrace.String()}})
	if err != nil {
		return err
	}
	defer s.stop()
	before := dirSize(s.natsDir)
	tok := token(b.secret, "bench-disk")
	var wg sync.WaitGroup
	errs := make(chan error, b.o.disk)
	sem := make(chan struct{}, 32)
	for range b.o.disk {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := postTask(ctx, s.base(), tok, newID(), diskContent); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := waitDone(ctx, s.dbURL, b.o.disk); err != nil {
		return err
	}
	finished := dirSize(s.natsDir)
	time.Sleep(diskGrace + 3*time.Second)
	kept := dirSize(s.natsDir)
	per := func(n int64) float64 { return float64(n-before) / float64(b.o.disk) * 1000 / (1 << 20) }
	d := diskRun{Tasks: b.o.disk, Finished: per(finished), Kept: per(kept)}
	b.logf("   log per 1,000 tasks: %.1f MiB when finished, %.1f MiB after the grace (%s)", d.Finished, d.Kept, diskGrace)
	b.res.Disk = &d
	return nil
}

// waitDone waits until n tasks are finished.
func waitDone(ctx context.Context, dbURL string, n int) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var done, failed int
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'done'),
			count(*) FILTER (WHERE status IN ('failed', 'cancelled')) FROM tasks`).Scan(&done, &failed); err != nil {
			return err
		}
		if failed > 0 {
			return fmt.Errorf("%d tasks failed", failed)
		}
		if done >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d tasks done after 5 minutes", done, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
