package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// binaries are the three programs every scenario runs, built once per test
// binary run from the module this package lives in.
type binaries struct {
	root    string // module root (holds go.mod)
	gateway string
	runner  string
	nats    string
}

var (
	buildOnce sync.Once
	built     binaries
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// needDatabase skips t when no Postgres is configured: every scenario runs
// real processes against a real database.
func needDatabase(t *testing.T) {
	t.Helper()
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set: the fault scenarios need a real Postgres; run " +
			"./scripts/with-test-pg.sh go test ./internal/faults/ -count=1 -v (or make test)")
	}
}

// programs builds the gateway, the runner and a nats-server from the pinned
// module the first time a test asks for them; later calls reuse them. The
// lead's work in progress may not compile now and then: the failure names the
// package so it is not mistaken for a harness fault.
func programs(t *testing.T) binaries {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("build the programs under test: %v", buildErr)
	}
	return built
}

func build() (binaries, error) {
	root, err := moduleRoot()
	if err != nil {
		return binaries{}, err
	}
	dir, err := os.MkdirTemp("", "tether-faults-bin-")
	if err != nil {
		return binaries{}, err
	}
	buildDir = dir
	b := binaries{
		root:    root,
		gateway: filepath.Join(dir, "gateway"),
		runner:  filepath.Join(dir, "runner"),
		nats:    filepath.Join(dir, "nats-server"),
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	targets := []struct{ out, pkg string }{
		{b.gateway, "./cmd/gateway"},
		{b.runner, "./cmd/runner"},
		{b.nats, "github.com/nats-io/nats-server/v2"},
	}
	// One go build for all three would need a directory output; three runs
	// share the build cache, and one after another keep a 2-core machine
	// usable for the tests of other packages running alongside.
	for _, tg := range targets {
		start := time.Now()
		cmd := exec.Command(goBin, "build", "-o", tg.out, tg.pkg)
		cmd.Dir = root
		cmd.Env = buildEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return b, fmt.Errorf("go build -o %s %s: %v\n%s", filepath.Base(tg.out), tg.pkg, err, out)
		}
		fmt.Fprintf(os.Stderr, "faults: built %s in %v\n", tg.pkg, time.Since(start).Round(time.Millisecond))
	}
	return b, nil
}

// buildEnv is the test's environment with -race taken out of GOFLAGS: the
// programs are built plainly even when the tests themselves run with the
// race detector, so the scenarios time what users run.
func buildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if flags, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			var keep []string
			for _, f := range strings.Fields(flags) {
				if f != "-race" && f != "--race" && f != "-race=true" {
					keep = append(keep, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(keep, " ")
		}
		env = append(env, kv)
	}
	return env
}

// moduleRoot is the directory holding go.mod: two levels up from this
// package when run by go test, found by walking up to be safe.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test's working directory")
		}
		dir = parent
	}
}

// trials is how many times a scenario runs: TETHER_FAULT_TRIALS when set,
// else def.
func trials(t *testing.T, def int) int {
	t.Helper()
	v := os.Getenv("TETHER_FAULT_TRIALS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("TETHER_FAULT_TRIALS=%q is not a positive integer", v)
	}
	return n
}
