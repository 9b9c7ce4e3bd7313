package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// long: one long answer end to end (a tab submits /stream N 0 and follows it
// to its last event, through the runner, NATS, Postgres snapshots and the
// gateway), against JetStream asynchronous publishes of as many events of
// the same size to the same server.
func (b *bench) long(ctx context.Context) error {
	s, err := b.start(ctx, "long", parts{runner: true})
	if err != nil {
		return err
	}
	defer s.stop()
	url := wsURL(s.gw.addr("http"), "/v1/ws")
	for rep := range b.o.repeats {
		var gwProf, runProf string
		if rep == 0 && b.o.profiles != "" {
			gwProf = filepath.Join(b.o.profiles, "long-gateway.pprof")
			runProf = filepath.Join(b.o.profiles, "long-runner.pprof")
		}
		secs := max(b.o.stream/20000, 1)
		stopGw := startProfile(s.gw.addr("pprof"), gwProf, secs)
		stopRun := startProfile(s.runner.addr("pprof"), runProf, secs)
		lr, err := b.longOnce(ctx, url, s)
		stopGw()
		stopRun()
		if err != nil {
			return err
		}
		srv := meter(s.nats.pid())
		raw, err := publishRaw(ctx, s.natsURL, b.o.stream, false)
		if err != nil {
			return err
		}
		lr.Raw, lr.RawNATSCPU = raw, us(srv.used())/float64(b.o.stream)
		lr.RawMsgID, err = publishRaw(ctx, s.natsURL, b.o.stream, true)
		if err != nil {
			return err
		}
		b.logf("   tether /stream %d 0: %.0f events/s (CPU an event: runner %.1f µs, nats-server %.1f µs, gateway %.1f µs)",
			b.o.stream, lr.Rate, lr.RunnerCPU, lr.NATSCPU, lr.GatewayCPU)
		b.logf("   raw    JetStream async publish: %.0f events/s (%.0f with message ids)", lr.Raw, lr.RawMsgID)
		b.res.Long = append(b.res.Long, lr)
	}
	return nil
}

func (b *bench) longOnce(ctx context.Context, url string, s *system) (longRun, error) {
	c, err := dial(ctx, url, token(b.secret, "bench-long"))
	if err != nil {
		return longRun{}, err
	}
	defer c.CloseNow()
	id := newID()
	gw, run, srv := meter(s.gw.pid()), meter(s.runner.pid()), meter(s.nats.pid())
	if err := send(ctx, c, map[string]any{"type": "submit", "req": "1", "task_id": id,
		"conversation_id": newID(), "content": "/stream " + strconv.Itoa(b.o.stream) + " 0"}); err != nil {
		return longRun{}, err
	}
	var (
		t0, t1          time.Time
		first, last     int64
		status, failure string
	)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	readFrames(rctx, c, nil, func(msg []byte) bool {
		switch msgType(msg) {
		case "status":
			if strField(msg, "task_id") != id {
				return true
			}
			status = strField(msg, "status")
			if status == "running" && t0.IsZero() {
				t0, first = time.Now(), intField(msg, "seq")
			}
			if status == "done" || status == "failed" || status == "cancelled" {
				t1, last = time.Now(), intField(msg, "seq")
				return false
			}
		case "error":
			failure = string(msg)
			return false
		}
		return true
	})
	if t1.IsZero() || status != "done" {
		return longRun{}, fmt.Errorf("the long answer did not finish (status %q) %s", status, failure)
	}
	events := float64(last - first)
	return longRun{Rate: events / t1.Sub(t0).Seconds(), RunnerCPU: us(run.used()) / events,
		GatewayCPU: us(gw.used()) / events, NATSCPU: us(srv.used()) / events}, nil
}

// publishRaw publishes n delta events (Tether's encoding, same size) with
// JetStream asynchronous publishes, at most as many awaiting their ack as a
// runner allows, and returns events per second once all are acknowledged.
func publishRaw(ctx context.Context, natsURL string, n int, msgIDs bool) (float64, error) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return 0, err
	}
	id := newID()
	subject := natsbus.TaskSubject(id)
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = protocol.EncodeEvent(task.Event{Type: task.EventDelta, TaskID: id, Seq: int64(i + 1),
			Attempt: 1, Text: "t" + strconv.Itoa(i+1) + " "})
	}
	start := time.Now()
	for i, p := range payloads {
		var opts []jetstream.PublishOpt
		if msgIDs {
			opts = append(opts, jetstream.WithMsgID(id+"-1-"+strconv.Itoa(i+1)))
		}
		if _, err := js.PublishAsync(subject, p, opts...); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return 0, fmt.Errorf("raw publishes not acknowledged in a minute")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
