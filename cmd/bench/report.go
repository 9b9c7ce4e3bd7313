package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type fanoutRun struct {
	Rate, CPUPerDelivery, PerFrame float64
	Gaps                           int64
	// Dropped counts tabs the server closed (too slow, a write timed out).
	Dropped int
}

type latencyRun struct {
	Load                               int
	P50, P99, CPUPerDelivery, PerFrame float64
}

type stormRun struct {
	All, P50              float64
	Errors, Gaps, Repeats int64
}

type submitRun struct {
	Rate, P50, P99, CPUPerSubmit float64
	// PostgresCPU is the database's CPU (every postgres process) a submit or an insert.
	PostgresCPU float64
}

type idleRun struct {
	KiB, Goroutines, SubKiB, SubGoroutines, RawKiB, RawGoroutines float64
	// LiveKiB, SubLiveKiB and RawLiveKiB are heap in use plus stacks after a forced GC.
	LiveKiB, SubLiveKiB, RawLiveKiB float64
}

type longRun struct {
	Rate, RunnerCPU, GatewayCPU, NATSCPU, Raw, RawMsgID, RawNATSCPU float64
}

type diskRun struct {
	Tasks          int
	Finished, Kept float64 // MiB per 1,000 tasks
}

// results are every run of every scenario.
type results struct {
	Options  options
	Machine  machineInfo
	Elapsed  time.Duration
	Capacity struct{ Tether, Raw []capRun }
	Fanout   struct{ Tether, Raw []fanoutRun }
	Latency  struct{ Tether, Raw []latencyRun }
	Storm    struct{ Tether, Raw []stormRun }
	Burst    struct{ Tether, Raw []submitRun }
	Closed   struct{ Tether, Raw []submitRun }
	Idle     []idleRun
	Long     []longRun
	Disk     *diskRun
	Compat   compatResults
}

// med is the median of f over runs.
func med[T any](runs []T, f func(T) float64) float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return median(xs)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// atLoad keeps the runs of one load.
func atLoad(runs []latencyRun, load int) []latencyRun {
	var out []latencyRun
	for _, r := range runs {
		if r.Load == load {
			out = append(out, r)
		}
	}
	return out
}

func num(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.0fk", x/1e3)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

// table is the results table of issue 12: each scenario, Tether, its
// baseline measured in the same run, and their ratio (medians of the repeats).
func (r *results) table() string {
	o := r.Options
	var b strings.Builder
	b.WriteString("| scenario | Tether | baseline in the same run | ratio |\n|---|---|---|---|\n")
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	r.capacityRow(row)
	if len(r.Fanout.Tether) > 0 {
		t, w := r.Fanout.Tether, r.Fanout.Raw
		tr, tc, wr, wc := med(t, func(x fanoutRun) float64 { return x.Rate }), med(t, func(x fanoutRun) float64 { return x.CPUPerDelivery }),
			med(w, func(x fanoutRun) float64 { return x.Rate }), med(w, func(x fanoutRun) float64 { return x.CPUPerDelivery })
		row(fmt.Sprintf("one task to %s tabs, flat out (%s events)", num(float64(o.tabs)), num(float64(o.events))),
			fmt.Sprintf("%s deliveries/s, %.2f µs CPU each, %.0f events a frame", num(tr), tc, med(t, func(x fanoutRun) float64 { return x.PerFrame })),
			fmt.Sprintf("coder/websocket broadcast fed by the same NATS subject: %s/s, %.2f µs", num(wr), wc),
			fmt.Sprintf("**%s raw at %s the CPU**", ratio(tr, wr), ratio(tc, wc)))
	}
	if len(r.Latency.Tether) > 0 {
		var tp, wp, rs, loads []string
		for _, l := range o.loads {
			t, w := atLoad(r.Latency.Tether, l), atLoad(r.Latency.Raw, l)
			a, c := med(t, func(x latencyRun) float64 { return x.P50 }), med(w, func(x latencyRun) float64 { return x.P50 })
			tp = append(tp, fmt.Sprintf("%.1f", a))
			wp = append(wp, fmt.Sprintf("%.1f", c))
			rs = append(rs, ratio(a, c))
			loads = append(loads, fmt.Sprint(l))
		}
		row(fmt.Sprintf("%s tabs at %s events/s", num(float64(o.tabs)), strings.Join(loads, " / ")),
			"p50 "+strings.Join(tp, " / ")+" ms", "raw p50 "+strings.Join(wp, " / ")+" ms", strings.Join(rs, " / "))
	}
	if len(r.Storm.Tether) > 0 {
		t, w := r.Storm.Tether, r.Storm.Raw
		ta, wa := med(t, func(x stormRun) float64 { return x.All }), med(w, func(x stormRun) float64 { return x.All })
		var errs, gaps, reps int64
		for _, x := range t {
			errs, gaps, reps = errs+x.Errors, gaps+x.Gaps, reps+x.Repeats
		}
		row(fmt.Sprintf("%s tabs reconnect and resubscribe at once", num(float64(o.storm))),
			fmt.Sprintf("all hold a snapshot in %.2f s (p50 %.0f ms), %d errors, %d gaps, %d repeats", ta,
				med(t, func(x stormRun) float64 { return x.P50 }), errs, gaps, reps),
			fmt.Sprintf("raw connect + first frame: %.2f s (p50 %.0f ms)", wa, med(w, func(x stormRun) float64 { return x.P50 })),
			ratio(ta, wa))
	}
	if len(r.Burst.Tether) > 0 {
		t, w := r.Burst.Tether, r.Burst.Raw
		tr, wr := med(t, func(x submitRun) float64 { return x.Rate }), med(w, func(x submitRun) float64 { return x.Rate })
		row(fmt.Sprintf("submit, %s at once (WebSocket)", num(float64(o.burst))),
			fmt.Sprintf("%s acks/s, p50 %.0f ms", num(tr), med(t, func(x submitRun) float64 { return x.P50 })),
			fmt.Sprintf("`INSERT … ON CONFLICT` via pgx, 8 connections: %s/s", num(wr)),
			"**"+ratio(tr, wr)+"**")
	}
	if len(r.Closed.Tether) > 0 {
		t, w := r.Closed.Tether, r.Closed.Raw
		tr, wr := med(t, func(x submitRun) float64 { return x.Rate }), med(w, func(x submitRun) float64 { return x.Rate })
		row(fmt.Sprintf("submit, %d closed-loop clients", o.clients),
			fmt.Sprintf("%s/s, p50 %.2f ms, p99 %.1f ms, %.3f ms gateway CPU and %.3f ms Postgres CPU a submit", num(tr),
				med(t, func(x submitRun) float64 { return x.P50 }), med(t, func(x submitRun) float64 { return x.P99 }),
				med(t, func(x submitRun) float64 { return x.CPUPerSubmit }), med(t, func(x submitRun) float64 { return x.PostgresCPU })),
			fmt.Sprintf("INSERT, %d connections: %s/s, p99 %.1f ms, %.3f ms Postgres CPU an insert", o.clients, num(wr),
				med(w, func(x submitRun) float64 { return x.P99 }), med(w, func(x submitRun) float64 { return x.PostgresCPU })),
			"**"+ratio(tr, wr)+"**")
	}
	if len(r.Latency.Tether) > 0 && len(o.loads) > 0 {
		l := o.loads[0]
		t, w := atLoad(r.Latency.Tether, l), atLoad(r.Latency.Raw, l)
		tc, wc := med(t, func(x latencyRun) float64 { return x.CPUPerDelivery }), med(w, func(x latencyRun) float64 { return x.CPUPerDelivery })
		row(fmt.Sprintf("%s tabs at %d events/s (%.1f events a frame: the per-message cost)", num(float64(o.tabs)), l,
			med(t, func(x latencyRun) float64 { return x.PerFrame })),
			fmt.Sprintf("%.2f µs CPU a delivery", tc), fmt.Sprintf("raw %.2f µs", wc), "**"+ratio(tc, wc)+"**")
	}
	if len(r.Idle) > 0 {
		t := r.Idle
		k, g := med(t, func(x idleRun) float64 { return x.KiB }), med(t, func(x idleRun) float64 { return x.Goroutines })
		sk, sg := med(t, func(x idleRun) float64 { return x.SubKiB }), med(t, func(x idleRun) float64 { return x.SubGoroutines })
		rk, rg := med(t, func(x idleRun) float64 { return x.RawKiB }), med(t, func(x idleRun) float64 { return x.RawGoroutines })
		lk, slk, rlk := med(t, func(x idleRun) float64 { return x.LiveKiB }), med(t, func(x idleRun) float64 { return x.SubLiveKiB }),
			med(t, func(x idleRun) float64 { return x.RawLiveKiB })
		row(fmt.Sprintf("idle tab, %v after the last connect (%s tabs, a user each)", idleSettle, num(float64(o.tabs))),
			fmt.Sprintf("%.1f KiB RSS (%.1f KiB heap and stacks after a GC), %.1f goroutines; subscribed to a task: %.1f KiB (%.1f), %.1f goroutines",
				k, lk, g, sk, slk, sg),
			fmt.Sprintf("bare read loop: %.1f KiB (%.1f), %.1f goroutines", rk, rlk, rg),
			fmt.Sprintf("%s (%s after a GC); subscribed %s the unsubscribed tab (%s)", ratio(k, rk), ratio(lk, rlk), ratio(sk, k), ratio(slk, lk)))
	}
	if len(r.Long) > 0 {
		t := r.Long
		tr, wr := med(t, func(x longRun) float64 { return x.Rate }), med(t, func(x longRun) float64 { return x.Raw })
		wi := med(t, func(x longRun) float64 { return x.RawMsgID })
		row(fmt.Sprintf("`/stream %d 0`, end to end", o.stream),
			fmt.Sprintf("%s events/s (CPU an event: runner %.1f µs, nats-server %.1f µs, gateway %.1f µs)", num(tr),
				med(t, func(x longRun) float64 { return x.RunnerCPU }), med(t, func(x longRun) float64 { return x.NATSCPU }),
				med(t, func(x longRun) float64 { return x.GatewayCPU })),
			fmt.Sprintf("JetStream async publish, same server: %s/s (nats-server %.1f µs an event); %s/s with message ids, as Tether publishes",
				num(wr), med(t, func(x longRun) float64 { return x.RawNATSCPU }), num(wi)),
			"**"+ratio(tr, wr)+"** ("+ratio(tr, wi)+" of the publish with ids)")
	}
	if r.Disk != nil {
		row(fmt.Sprintf("JetStream log on disk per 1,000 tasks (`%s`, %d tasks)", diskContent, r.Disk.Tasks),
			fmt.Sprintf("%.1f MiB when they finish; %.1f MiB once `TETHER_LOG_GRACE` (%v here) has passed", r.Disk.Finished, r.Disk.Kept, diskGrace),
			"–", "–")
	}
	r.compatRows(row)
	return b.String()
}

// writeReport writes docs/BENCHMARKS.md and the plot. The notes section of
// an existing report (between the notes markers) is kept.
func (b *bench) writeReport(args []string) error {
	r := &b.res
	const beginNotes, endNotes = "<!-- notes: kept by cmd/bench -->", "<!-- end of notes -->"
	notes := beginNotes + "\n" + endNotes
	if old, err := os.ReadFile(b.o.out); err == nil {
		s := string(old)
		if i, j := strings.Index(s, beginNotes), strings.Index(s, endNotes); i >= 0 && j > i {
			notes = s[i : j+len(endNotes)]
		}
	}
	var w strings.Builder
	w.WriteString("# Benchmarks\n\n")
	w.WriteString("Made by `make bench` (`cmd/bench`), which rewrites this file except its notes. It builds the gateway, the\n")
	w.WriteString("runner and a nats-server, runs them as separate processes on 127.0.0.1 against a Postgres with fsync\n")
	w.WriteString("on, and drives them with real WebSocket clients from its own process. Each scenario's raw baseline\n")
	w.WriteString("runs in the same invocation, the sides interleaved; figures are medians of the repeats.\n\n")
	cmd := "make bench"
	if len(args) > 0 {
		cmd = "go run ./cmd/bench " + strings.Join(args, " ")
	}
	fmt.Fprintf(&w, "Command: `%s` (%d repeats; the whole run, build included, took %s).\n\n", cmd, r.Options.repeats, r.Elapsed.Round(time.Second))
	m := r.Machine
	w.WriteString("| machine | |\n|---|---|\n")
	for _, kv := range [][2]string{{"CPU", m.CPU}, {"cores", m.Cores}, {"memory", m.Memory}, {"kernel", m.Kernel},
		{"Go", m.Go}, {"Postgres", m.Postgres}, {"modules", m.Modules}, {"commit", m.Commit},
		{"load average (1, 5, 15 min) at start and end", m.LoadStart + "; " + m.LoadEnd}} {
		fmt.Fprintf(&w, "| %s | %s |\n", kv[0], kv[1])
	}
	w.WriteString("\n## Results\n\n")
	w.WriteString(r.table())
	if b.o.capSVG != "" && len(r.Capacity.Tether) > 0 {
		rel, err := filepath.Rel(filepath.Dir(b.o.out), b.o.capSVG)
		if err != nil {
			rel = b.o.capSVG
		}
		fmt.Fprintf(&w, "\n![Capacity: p99 latency of a delivery against answers streaming at once, Tether and the raw path](%s)\n", rel)
		if err := os.WriteFile(b.o.capSVG, []byte(r.capacityPlot()), 0o644); err != nil {
			return err
		}
	}
	if b.o.svg != "" && len(r.Latency.Tether) > 0 {
		rel, err := filepath.Rel(filepath.Dir(b.o.out), b.o.svg)
		if err != nil {
			rel = b.o.svg
		}
		fmt.Fprintf(&w, "\n![Latency against load: p50 and p99 of Tether and the raw broadcast](%s)\n", rel)
		if err := os.WriteFile(b.o.svg, []byte(r.plot()), 0o644); err != nil {
			return err
		}
	}
	w.WriteString("\n## Every run\n\n")
	w.WriteString(r.runs())
	w.WriteString("\n## What each scenario does\n\n")
	w.WriteString(scenarioDocs)
	w.WriteString("\n" + notes + "\n")
	return os.WriteFile(b.o.out, []byte(w.String()), 0o644)
}

// runs lists every repeat, so a median can be checked against its spread.
func (r *results) runs() string {
	var b strings.Builder
	list := func(name string, xs []string) {
		if len(xs) > 0 {
			fmt.Fprintf(&b, "- %s: %s\n", name, strings.Join(xs, "; "))
		}
	}
	var xs []string
	for _, side := range []struct {
		name string
		runs []capRun
	}{{"capacity, Tether", r.Capacity.Tether}, {"capacity, raw", r.Capacity.Raw}} {
		xs = nil
		for _, t := range side.runs {
			v := "pass"
			if !t.Pass {
				v = "fail: " + t.Why
			}
			xs = append(xs, fmt.Sprintf("%d answers p50 %.1f p99 %.1f ms, machine %.0f%% busy (%s)", t.N, t.P50, t.P99, 100*t.Busy, v))
		}
		list(side.name, xs)
	}
	xs = nil
	for i, t := range r.Fanout.Tether {
		w := r.Fanout.Raw[min(i, len(r.Fanout.Raw)-1)]
		xs = append(xs, fmt.Sprintf("%s/s %.2f µs (%d dropped) vs raw %s/s %.2f µs (%d dropped)",
			num(t.Rate), t.CPUPerDelivery, t.Dropped, num(w.Rate), w.CPUPerDelivery, w.Dropped))
	}
	list("flat out", xs)
	xs = nil
	for i, t := range r.Latency.Tether {
		w := r.Latency.Raw[min(i, len(r.Latency.Raw)-1)]
		xs = append(xs, fmt.Sprintf("%d/s p50 %.1f p99 %.1f ms %.1f µs vs raw p50 %.1f p99 %.1f ms %.1f µs",
			t.Load, t.P50, t.P99, t.CPUPerDelivery, w.P50, w.P99, w.CPUPerDelivery))
	}
	list("latency", xs)
	xs = nil
	for i, t := range r.Storm.Tether {
		w := r.Storm.Raw[min(i, len(r.Storm.Raw)-1)]
		xs = append(xs, fmt.Sprintf("%.2f s (%d errors, %d gaps, %d repeats) vs raw %.2f s", t.All, t.Errors, t.Gaps, t.Repeats, w.All))
	}
	list("reconnect", xs)
	xs = nil
	for i, t := range r.Burst.Tether {
		w := r.Burst.Raw[min(i, len(r.Burst.Raw)-1)]
		xs = append(xs, fmt.Sprintf("%s/s p50 %.0f ms vs raw %s/s", num(t.Rate), t.P50, num(w.Rate)))
	}
	list("submit burst", xs)
	xs = nil
	for i, t := range r.Closed.Tether {
		w := r.Closed.Raw[min(i, len(r.Closed.Raw)-1)]
		xs = append(xs, fmt.Sprintf("%s/s p99 %.1f ms %.3f ms CPU (Postgres %.3f ms) vs raw %s/s (Postgres %.3f ms)",
			num(t.Rate), t.P99, t.CPUPerSubmit, t.PostgresCPU, num(w.Rate), w.PostgresCPU))
	}
	list("submit closed loop", xs)
	xs = nil
	for _, t := range r.Idle {
		xs = append(xs, fmt.Sprintf("%.1f KiB (%.1f) %.2f g, subscribed %.1f KiB (%.1f) %.2f g vs raw %.1f KiB (%.1f) %.2f g",
			t.KiB, t.LiveKiB, t.Goroutines, t.SubKiB, t.SubLiveKiB, t.SubGoroutines, t.RawKiB, t.RawLiveKiB, t.RawGoroutines))
	}
	list("idle", xs)
	xs = nil
	for _, t := range r.Long {
		xs = append(xs, fmt.Sprintf("%s/s vs raw %s/s (%s/s with ids)", num(t.Rate), num(t.Raw), num(t.RawMsgID)))
	}
	list("long answer", xs)
	r.compatRuns(list)
	return b.String()
}

const scenarioDocs = capacityDocs + `- **Flat out**: one pending task (no runner), every tab of one user subscribed to it; this process
  publishes events on the task's subject as a runner does (JetStream, asynchronous, Tether's encoding)
  as fast as it can, and measures until every tab has the last one. The baseline is the coder/websocket
  chat example (a channel and a writer goroutine per client, a frame per message, a timeout per write)
  fed by a core subscription to a subject of the same stream. CPU is the server process's (user +
  system, from /proc) over the run, divided by the deliveries; NATS runs in a process of its own.
- **Latency**: the same tabs, events published at a steady rate, each carrying the time it was sent;
  every tab measures every delivery. At low rates each event is a frame of its own, so the CPU per
  delivery is the per-message cost.
- **Reconnect**: a real runner streams ` + "`/stream 100000 100`" + `; all the tabs connect and subscribe at once and must
  each hold a snapshot, then every event after it exactly once (gaps and repeats are counted for a
  second after the last snapshot). The baseline connects as many clients to a server that sends one
  frame on connect.
- **Submit**: a burst (each of that many tabs, one user each, sends one submit at the same moment,
  acks/s = submits / time of the last ack) and a closed loop (each client submits, waits for its
  ack, submits again). The baseline inserts a row of the same content keyed on a client-made UUID,
  ` + "`INSERT … ON CONFLICT (id) DO NOTHING`" + `, through a pgx pool of 8 connections (burst) or one connection per
  client (closed loop). No runner runs, so the figures are the gateway's and Postgres's.
- **Idle**: fresh processes each repeat; tabs (one user each) connect and stay idle; RSS and
  goroutines of the server process are read 3 s after the last connect, before and after; then each
  tab subscribes to a task of its own that sends nothing. The baseline is a bare read loop.
- **Long answer**: a tab submits ` + "`/stream N 0`" + ` and follows it; events/s from its running event to its last.
  The baseline publishes as many events of the same encoding with JetStream asynchronous publishes
  (4,096 awaiting acks at most, like a runner) to the same server, without and with message ids.
- **Log disk**: tasks of about 300 events each run to the end; the size of the nats-server's store
  directory, per 1,000 tasks, when they finish and after the grace for late resumers.
` + compatDocs

// plot draws latency against load: p50 and p99 of both sides, log scales.
func (r *results) plot() string {
	loads := slices.Clone(r.Options.loads)
	slices.Sort(loads)
	var ss []plotSeries
	for _, s := range []struct {
		name, color string
		runs        []latencyRun
	}{{"Tether", "#1f6feb", r.Latency.Tether}, {"raw broadcast", "#d1242f", r.Latency.Raw}} {
		for _, q := range []struct {
			name, dash string
			f          func(latencyRun) float64
		}{{"p50", "", func(x latencyRun) float64 { return x.P50 }}, {"p99", "6 4", func(x latencyRun) float64 { return x.P99 }}} {
			se := plotSeries{name: s.name + " " + q.name, color: s.color, dash: q.dash}
			for _, l := range loads {
				if runs := atLoad(s.runs, l); len(runs) > 0 {
					se.pts = append(se.pts, [2]float64{float64(l), med(runs, q.f)})
				}
			}
			ss = append(ss, se)
		}
	}
	return latencyPlot{
		title:  fmt.Sprintf("Latency of a delivery against load (%s tabs, log scales)", num(float64(r.Options.tabs))),
		xLabel: "events per second (each to every tab)",
		xs:     loads, series: ss,
	}.svg()
}
