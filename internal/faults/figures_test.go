package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// arrivals counts what reached a reader (a tab, or the log read in stream
// order) against the order the protocol promises: every event of the
// current attempt once, in seq order, none of an older attempt.
type arrivals struct {
	readers   int
	received  int
	lost      int // a seq that never came while later ones did
	doubled   int // a seq that came again, or at or below the snapshot's
	reordered int // a seq that came after a higher one
	stale     int // an event of an attempt older than the reader's
	gaps      int // events the 1.1 rule could not apply (a tab resyncs)
	// unsolicited: snapshots a gateway sent a tab unasked, in place of
	// events it could not find in the log (allowed; counted).
	unsolicited int
}

func (a *arrivals) add(b arrivals) {
	a.readers += max(1, b.readers)
	a.received += b.received
	a.lost += b.lost
	a.doubled += b.doubled
	a.reordered += b.reordered
	a.stale += b.stale
	a.gaps += b.gaps
	a.unsolicited += b.unsolicited
}

func (a arrivals) String() string {
	return fmt.Sprintf("%d readers, %d events received: lost %d, doubled %d, reordered %d, stale %d, gaps %d, unsolicited snapshots %d",
		a.readers, a.received, a.lost, a.doubled, a.reordered, a.stale, a.gaps, a.unsolicited)
}

// tally gathers one scenario's figures over its trials; its summary, one
// line starting with FIGURES, is what docs/RELIABILITY.md quotes.
type tally struct {
	mu       sync.Mutex
	trials   int
	answers  int
	pgExact  int
	logExact int
	tabExact int
	tabs     arrivals
	log      arrivals
	attempts map[int]int // answers by the attempt they ended on
	times    map[string][]time.Duration
	counts   map[string]map[string]int
	order    []string
}

func newTally() *tally {
	return &tally{attempts: map[int]int{}, times: map[string][]time.Duration{}, counts: map[string]map[string]int{}}
}

// time records one measurement of the figure named what.
func (tl *tally) time(what string, d time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.times[what]; !ok {
		if _, ok := tl.counts[what]; !ok {
			tl.order = append(tl.order, what)
		}
	}
	tl.times[what] = append(tl.times[what], d)
}

// count adds n to the bucket key of the figure named what (error codes
// seen, for example).
func (tl *tally) count(what, key string, n int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.counts[what]; !ok {
		if _, ok := tl.times[what]; !ok {
			tl.order = append(tl.order, what)
		}
		tl.counts[what] = map[string]int{}
	}
	tl.counts[what][key] += n
}

func (tl *tally) trial() {
	tl.mu.Lock()
	tl.trials++
	tl.mu.Unlock()
}

// summary is the FIGURES line.
func (tl *tally) summary(name string) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "FIGURES %s: %d trials, %d answers", name, tl.trials, tl.answers)
	if tl.answers > 0 {
		var at []string
		keys := make([]int, 0, len(tl.attempts))
		for k := range tl.attempts {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		for _, k := range keys {
			at = append(at, fmt.Sprintf("attempt %d: %d", k, tl.attempts[k]))
		}
		fmt.Fprintf(&b, " (ended on %s); Postgres exact %d/%d; log replay exact %d/%d (%s); tabs exact %d/%d (%s)",
			strings.Join(at, ", "), tl.pgExact, tl.answers, tl.logExact, tl.answers, tl.log, tl.tabExact, tl.tabs.readers, tl.tabs)
	}
	for _, what := range tl.order {
		if ds, ok := tl.times[what]; ok {
			fmt.Fprintf(&b, "; %s: %s", what, spread(ds))
		}
		if cs, ok := tl.counts[what]; ok {
			var keys []string
			for k := range cs {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s ×%d", k, cs[k]))
			}
			if len(parts) == 0 {
				parts = []string{"none"}
			}
			fmt.Fprintf(&b, "; %s: %s", what, strings.Join(parts, ", "))
		}
	}
	return b.String()
}

// spread is n, min, median and max of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }
	if len(s) == 1 {
		return r(s[0])
	}
	return fmt.Sprintf("n=%d min %s median %s max %s", len(s), r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
}

// reportFigures logs the scenario's FIGURES line when t ends and appends
// it to test-artifacts/faults/figures.txt.
func (s *system) reportFigures(t *testing.T) {
	t.Cleanup(func() {
		line := s.tally.summary(t.Name())
		if t.Failed() {
			line += " [FAILED]"
		}
		// The machine's load when the scenario ended: other work on a
		// 2-core machine stretches every figure.
		if b, err := os.ReadFile("/proc/loadavg"); err == nil {
			if f := strings.Fields(string(b)); len(f) >= 3 {
				line += " [load " + strings.Join(f[:3], " ") + "]"
			}
		}
		t.Log(line)
		writeFigure(s.bins.root, line)
	})
}

var (
	figuresMu    sync.Mutex
	figuresStart bool
)

// writeFigure appends line to test-artifacts/faults/figures.txt under the
// module root, starting the file afresh (with the run's settings and
// machine) on the first line of a run. `make test-faults` prints it.
func writeFigure(root, line string) {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	dir := filepath.Join(root, "test-artifacts", "faults")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	path := filepath.Join(dir, "figures.txt")
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if !figuresStart {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	if !figuresStart {
		figuresStart = true
		fmt.Fprintf(f, "# %s, %d CPUs, %s %s/%s, TETHER_FAULTS=%q TETHER_FAULT_TRIALS=%q\n",
			time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
			os.Getenv("TETHER_FAULTS"), os.Getenv("TETHER_FAULT_TRIALS"))
	}
	fmt.Fprintln(f, line)
}
