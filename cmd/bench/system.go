package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/natsbus"
)

// bench is one invocation: the built programs, the database, the results.
type bench struct {
	o         options
	out       io.Writer
	dir       string // logs and data of this run
	gateway   string
	runner    string
	natsSrv   string
	secret    string
	buildTime time.Duration
	schemas   []string
	res       results
	logMu     sync.Mutex
}

func newBench(ctx context.Context, o options, out io.Writer) (*bench, error) {
	dir, err := os.MkdirTemp("", "tether-bench-")
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, out: out, dir: dir, secret: "bench-secret-0123456789-0123456789-abcdef"}
	b.res.Options = o
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(dir, "bin")
		t0 := time.Now()
		b.logf("building the gateway, the runner and nats-server")
		root, err := moduleRoot(ctx)
		if err != nil {
			b.close()
			return nil, err
		}
		for _, pkg := range [][2]string{{"gateway", "./cmd/gateway"}, {"runner", "./cmd/runner"},
			{"nats-server", "github.com/nats-io/nats-server/v2"}} {
			cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, pkg[0]), pkg[1])
			cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				b.close()
				return nil, fmt.Errorf("build %s: %w", pkg[1], err)
			}
		}
		b.buildTime = time.Since(t0)
	}
	b.gateway, b.runner, b.natsSrv = filepath.Join(bin, "gateway"), filepath.Join(bin, "runner"), filepath.Join(bin, "nats-server")
	if o.profiles != "" {
		if err := os.MkdirAll(o.profiles, 0o755); err != nil {
			return nil, err
		}
	}
	b.res.Machine = machine(ctx, o.databaseU, b.gateway)
	return b, nil
}

func (b *bench) logf(format string, args ...any) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	fmt.Fprintf(b.out, format+"\n", args...)
}

// close drops the bench's schemas and its directory (unless asked to keep
// the logs).
func (b *bench) close() {
	if len(b.schemas) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if conn, err := pgx.Connect(ctx, b.o.databaseU); err == nil {
			for _, s := range b.schemas {
				_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{s}.Sanitize()+" CASCADE")
			}
			conn.Close(ctx)
		}
	}
	if b.o.keepLogs {
		b.logf("logs kept in %s", b.dir)
		return
	}
	_ = os.RemoveAll(b.dir)
}

// freshDatabase makes an empty schema and returns the URL that uses it.
func (b *bench) freshDatabase(ctx context.Context) (string, error) {
	u, err := url.Parse(b.o.databaseU)
	if err != nil {
		return "", fmt.Errorf("database URL: %w", err)
	}
	raw := make([]byte, 6)
	_, _ = rand.Read(raw)
	schema := "bench_" + hex.EncodeToString(raw)
	conn, err := pgx.Connect(ctx, b.o.databaseU)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", err
	}
	b.schemas = append(b.schemas, schema)
	q := u.Query()
	q.Set("options", "-csearch_path="+schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// system is one set of running programs for a scenario.
type system struct {
	b       *bench
	nats    *proc
	gw      *proc
	runner  *proc
	raw     *proc
	natsURL string
	dbURL   string
	natsDir string
	bus     *natsbus.Bus
}

type parts struct {
	runner bool
	raw    bool
	env    []string // extra environment of the gateway and runner
	// runnerEnv is extra environment of the runner alone (later values win).
	runnerEnv []string
}

// start runs nats-server, a gateway on a fresh schema and, as asked, a
// runner and the raw baseline server.
func (b *bench) start(ctx context.Context, name string, p parts) (_ *system, err error) {
	s := &system{b: b}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	dir, err := os.MkdirTemp(b.dir, name+"-")
	if err != nil {
		return nil, err
	}
	s.natsDir = filepath.Join(dir, "nats")
	s.nats, err = startProc(ctx, dir, "nats-server", b.natsSrv,
		[]string{"-a", "127.0.0.1", "-p", "-1", "-js", "-sd", s.natsDir, "-n", "bench"}, nil, "nats")
	if err != nil {
		return nil, err
	}
	s.natsURL = s.nats.addr("nats")
	if s.dbURL, err = b.freshDatabase(ctx); err != nil {
		return nil, err
	}
	common := []string{"DATABASE_URL=" + s.dbURL, "NATS_URL=" + s.natsURL, "TETHER_PPROF_ADDR=127.0.0.1:0",
		"TETHER_PENDING_TIMEOUT=1h", "TETHER_LOG_LEVEL=info", "TETHER_CONNECT_TIMEOUT=30s"}
	common = append(common, p.env...)
	s.gw, err = startProc(ctx, dir, "gateway", b.gateway, nil, append([]string{
		"TETHER_ADDR=127.0.0.1:0", "TETHER_DATA_DIR=" + filepath.Join(dir, "gw"),
		"TETHER_AUTH_SECRET=" + b.secret, "TETHER_RATE=0", "TETHER_CONN_RATE=0",
		"TETHER_MAX_TABS_PER_USER=1000000", "TETHER_MAX_SUBSCRIPTIONS=1000000",
	}, common...), "http", "pprof")
	if err != nil {
		return nil, err
	}
	if p.runner {
		s.runner, err = startProc(ctx, dir, "runner", b.runner, nil, append([]string{
			"TETHER_RUNNER_CONCURRENCY=64", "TETHER_RUNNER_ID=bench-runner", "TETHER_DRAIN_TIMEOUT=1s"}, append(common, p.runnerEnv...)...), "pprof")
		if err != nil {
			return nil, err
		}
	}
	if p.raw {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		s.raw, err = startProc(ctx, dir, "raw", self, nil, []string{envRawListen + "=127.0.0.1:0",
			envRawNATS + "=" + s.natsURL, envRawPprof + "=127.0.0.1:0"}, "http", "pprof")
		if err != nil {
			return nil, err
		}
	}
	s.bus, err = natsbus.Connect(ctx, s.natsURL, natsbus.Config{Name: "bench"})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *system) stop() {
	if s.bus != nil {
		s.bus.Close()
	}
	// The raw server and the runner first, then the gateway, then NATS.
	for _, p := range []*proc{s.raw, s.runner, s.gw, s.nats} {
		if p != nil {
			p.stop()
		}
	}
}

func (s *system) base() string { return "http://" + s.gw.addr("http") }

// moduleRoot is the directory of the go.mod the bench belongs to.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run the bench inside Tether's module")
	}
	return filepath.Dir(mod), nil
}

// machineInfo says where the numbers were taken.
type machineInfo struct {
	CPU, Cores, Memory, Kernel, Go, Postgres, Modules, Commit string
	// LoadStart and LoadEnd are /proc/loadavg when the run began and ended:
	// what else the machine was doing.
	LoadStart, LoadEnd string
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func machine(ctx context.Context, dbURL, gatewayBin string) machineInfo {
	m := machineInfo{Cores: fmt.Sprint(runtime.NumCPU()), Go: runtime.Version(), LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
		m.Memory = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if conn, err := pgx.Connect(ctx, dbURL); err == nil {
		var v, fsync string
		_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
		_ = conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync)
		m.Postgres = "PostgreSQL " + v + ", fsync " + fsync
		conn.Close(ctx)
	}
	if out, err := exec.CommandContext(ctx, "go", "version", "-m", gatewayBin).Output(); err == nil {
		var mods []string
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "dep" {
				switch f[1] {
				case "github.com/coder/websocket", "github.com/nats-io/nats.go", "github.com/nats-io/nats-server/v2", "github.com/jackc/pgx/v5":
					mods = append(mods, strings.TrimPrefix(f[1], "github.com/")+" "+f[2])
				}
			}
		}
		m.Modules = strings.Join(mods, ", ")
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}
