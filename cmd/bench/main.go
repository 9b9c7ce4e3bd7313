// Command bench is Tether's load program (`make bench`). It builds the
// gateway, the runner and a nats-server, starts them as separate processes on
// 127.0.0.1 against the Postgres of DATABASE_URL (or TEST_DATABASE_URL), and
// drives them from this process with real WebSocket clients. In the same
// invocation, sides interleaved, it measures the raw baselines: for the
// capacity sweep (how many paced answers can stream at once, 2 tabs each)
// the same events published on NATS core to the raw broadcast, nothing
// stored; a minimal coder/websocket broadcast fed by the same NATS subject
// for the fan-out; a bare read loop for idle connections; INSERT … ON
// CONFLICT through pgx for submits; JetStream asynchronous publishes for
// long answers. The compat scenario measures the encoders of PROTOCOL.md
// section 11 against Tether's own SSE path on the same tasks. It prints the
// table and writes docs/BENCHMARKS.md with plots of latency against answers
// at once and against load.
//
//	go run ./cmd/bench                 # the full run (several minutes on 2 cores)
//	go run ./cmd/bench -smoke -out ''  # a short run that checks it all works
//
// Every process it starts is ended by its PID.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if rawServer() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the sizes of a run.
type options struct {
	tabs      int           // tabs of the fan-out, latency and idle scenarios
	storm     int           // tabs that reconnect at once
	burst     int           // submits sent at once
	closed    time.Duration // length of the closed-loop submit run
	clients   int           // closed-loop submit clients
	events    int           // events of the flat-out fan-out
	loads     []int         // events per second of the latency runs
	duration  time.Duration // length of one latency run
	stream    int           // N of the long answer, /stream N 0
	capTokens int           // K of each answer of the capacity scenario, /stream K pace
	capPace   time.Duration // the pace of its answers (33 ms: 30 tokens/s)
	capSteps  []int         // answers at once of its sweep, rising
	disk      int           // tasks of the log-disk run
	repeats   int
	only      map[string]bool
	out, svg  string
	capSVG    string // the capacity plot
	profiles  string // directory for CPU profiles of the Tether side, or ""
	bin       string // directory with prebuilt gateway, runner and nats-server, or ""
	smoke     bool
	keepLogs  bool
	databaseU string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var only, loads, capSteps string
	fs.IntVar(&o.tabs, "tabs", 1000, "tabs of the fan-out, latency and idle scenarios")
	fs.IntVar(&o.storm, "storm", 2000, "tabs that reconnect and resubscribe at once")
	fs.IntVar(&o.burst, "burst", 1000, "submits sent at once")
	fs.DurationVar(&o.closed, "closed", 5*time.Second, "length of the closed-loop submit run")
	fs.IntVar(&o.clients, "clients", 4, "closed-loop submit clients")
	fs.IntVar(&o.events, "events", 3000, "events of the flat-out fan-out")
	fs.StringVar(&loads, "loads", "10,100,300", "events per second of the latency runs")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of one latency run")
	fs.IntVar(&o.stream, "stream", 100000, "N of the long answer (/stream N 0)")
	fs.IntVar(&o.capTokens, "capacity-tokens", 400, "tokens of each answer of the capacity scenario")
	fs.DurationVar(&o.capPace, "capacity-pace", 33*time.Millisecond, "the pace of the capacity scenario's answers")
	fs.StringVar(&capSteps, "capacity-steps", "10,20,40,80,160,240,320,480,640,960,1280", "answers at once of the capacity sweep, rising")
	fs.IntVar(&o.disk, "disk", 1000, "tasks of the log-disk run")
	fs.IntVar(&o.repeats, "repeats", 3, "runs of each scenario and baseline (medians are reported)")
	fs.StringVar(&only, "only", "", "comma-separated scenarios: capacity,idle,fanout,latency,storm,submit,long,disk,compat (default all)")
	fs.StringVar(&o.out, "out", "docs/BENCHMARKS.md", "the report to write (\"\": none)")
	fs.StringVar(&o.svg, "svg", "docs/bench-latency.svg", "the plot to write (\"\": none)")
	fs.StringVar(&o.capSVG, "capacity-svg", "docs/bench-capacity.svg", "the capacity plot to write (\"\": none)")
	fs.StringVar(&o.profiles, "profiles", "", "save CPU profiles of the gateway and runner here")
	fs.StringVar(&o.bin, "bin", "", "use the gateway, runner and nats-server already built in this directory")
	fs.BoolVar(&o.smoke, "smoke", false, "a short run with small sizes: checks that everything works")
	fs.BoolVar(&o.keepLogs, "keep-logs", false, "keep the processes' logs (printed where)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.smoke {
		o.tabs, o.storm, o.burst, o.closed, o.events = 50, 100, 100, time.Second, 300
		o.duration, o.stream, o.disk, o.repeats = time.Second, 5000, 50, 1
		if !flagSet(fs, "loads") {
			loads = "10,100"
		}
		if !flagSet(fs, "capacity-steps") {
			capSteps = "2,4"
		}
		if !flagSet(fs, "capacity-tokens") {
			o.capTokens = 30
		}
	}
	for _, s := range strings.Split(loads, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 {
			return o, fmt.Errorf("-loads: %q is not a rate", s)
		}
		o.loads = append(o.loads, n)
	}
	for _, s := range strings.Split(capSteps, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 || (len(o.capSteps) > 0 && n <= o.capSteps[len(o.capSteps)-1]) {
			return o, fmt.Errorf("-capacity-steps: %q is not a rising count", s)
		}
		o.capSteps = append(o.capSteps, n)
	}
	if o.capTokens < 1 || o.capPace <= 0 {
		return o, errors.New("-capacity-tokens and -capacity-pace must be positive")
	}
	if only != "" {
		o.only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			o.only[strings.TrimSpace(s)] = true
		}
	}
	o.databaseU = getenv("DATABASE_URL")
	if o.databaseU == "" {
		o.databaseU = getenv("TEST_DATABASE_URL")
	}
	if o.databaseU == "" {
		return o, errors.New("set DATABASE_URL or TEST_DATABASE_URL (make bench starts a Postgres with fsync on)")
	}
	if o.repeats < 1 || o.tabs < 1 || o.storm < 1 || o.burst < 1 || o.clients < 1 {
		return o, errors.New("sizes must be positive")
	}
	return o, nil
}

// The raw baseline server is this program run again with these variables
// set (rawServer), so its CPU and memory are a process's of its own.
const (
	envRawListen = "TETHER_BENCH_RAW_LISTEN"
	envRawNATS   = "TETHER_BENCH_RAW_NATS"
	envRawPprof  = "TETHER_BENCH_RAW_PPROF"
)

// rawServer serves the raw baselines when this process was started as the
// raw server, and reports whether it was.
func rawServer() bool {
	listen := os.Getenv(envRawListen)
	if listen == "" {
		return false
	}
	if err := serveRaw(os.Getenv(envRawNATS), listen, os.Getenv(envRawPprof)); err != nil {
		fmt.Fprintln(os.Stderr, "bench raw server:", err)
		os.Exit(1)
	}
	return true
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	b, err := newBench(ctx, o, stdout)
	if err != nil {
		return err
	}
	defer b.close()
	start := time.Now()
	scenarios := []struct {
		name string
		run  func(context.Context) error
	}{
		{"capacity", b.capacity},
		{"idle", b.idle},
		{"fanout", b.fanout},
		{"latency", b.latency},
		{"storm", b.storm},
		{"submit", b.submit},
		{"long", b.long},
		{"disk", b.diskUse},
		{"compat", b.compat},
	}
	for _, s := range scenarios {
		if o.only != nil && !o.only[s.name] {
			continue
		}
		t0 := time.Now()
		b.logf("== %s", s.name)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		b.logf("   %s took %v", s.name, time.Since(t0).Round(100*time.Millisecond))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	b.res.Elapsed = time.Since(start) + b.buildTime
	b.res.Machine.LoadEnd = loadAvg()
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, b.res.table())
	if o.out != "" {
		if err := b.writeReport(args); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s", o.out)
		if o.svg != "" {
			fmt.Fprintf(stdout, " and %s", o.svg)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}
