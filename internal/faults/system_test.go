package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres/pgtest"
)

const (
	testSecret = "faults-secret-0123456789abcdef-0123456789"
	testUser   = "faults-user"
	// maintenanceEvery keeps lease expiry and re-dispatch quick.
	maintenanceEvery = 200 * time.Millisecond
)

// sysOptions shape one system under test.
type sysOptions struct {
	// gateways on the standalone NATS (ignored when embedded).
	gateways int
	// embedded: one gateway embedding NATS (the `make run` form) on a fixed
	// port, with its JetStream store under the test's directory.
	embedded bool
	// natsNodes is the number of nats-servers (1 unless set; 3 is the
	// cluster of nats.conf, whose streams then keep 3 replicas). Ignored
	// when embedded.
	natsNodes int
	// balanced puts the round-robin balancer in front of the gateways: tabs
	// and HTTP clients then connect to its one address.
	balanced bool
	runners  int
	// proxied: every runner reaches Postgres through its own pausable proxy.
	proxied bool
	lease   time.Duration
	// dbURL, when set, is the Postgres every process uses (a private cluster
	// a test stops and starts) instead of a fresh schema on
	// TEST_DATABASE_URL.
	dbURL string
}

// system is a whole Tether made of real processes on 127.0.0.1: nats-servers
// (unless a gateway embeds NATS), gateways and runners, all on one Postgres
// schema, and, when balanced, one address in front of the gateways.
type system struct {
	t     *testing.T
	opts  sysOptions
	bins  binaries
	dir   string
	dbURL string
	db    *pgxpool.Pool
	token string

	nats     []*natsNode // the nats-servers; none when a gateway embeds NATS
	natsPort int         // the embedded NATS's client port
	natsURL  string      // every node, comma-separated, as NATS_URL
	replicas int         // TETHER_NATS_REPLICAS of the gateways and runners

	gateways []*gatewayProc
	runners  []*runnerProc
	lb       *balancer // nil unless balanced
	// tally gathers the scenario's figures; its FIGURES line is logged when
	// the test that made the system ends.
	tally *tally

	mu      sync.Mutex
	procs   []*proc
	crashes []string
	summary strings.Builder
	nextID  int
	// keep says why the process logs are worth keeping although the test
	// passed (a figure far from the usual), or is empty.
	keep []string
}

type gatewayProc struct {
	*proc
	port int
	// natsListen and dataDir are set for a gateway that embeds NATS.
	natsListen string
	dataDir    string
}

// wsURL is the gateway's WebSocket endpoint.
func (g *gatewayProc) wsURL() string { return fmt.Sprintf("ws://127.0.0.1:%d/v1/ws", g.port) }
func (g *gatewayProc) base() string  { return fmt.Sprintf("http://127.0.0.1:%d", g.port) }

type runnerProc struct {
	*proc
	id    string
	proxy *proxy // nil unless the system is proxied
}

// newSystem starts a system and stops it when t ends; the logs of a failed
// test are copied to test-artifacts/faults/<test>/.
func newSystem(t *testing.T, o sysOptions) *system {
	t.Helper()
	needDatabase(t)
	bins := programs(t)
	s := &system{t: t, opts: o, bins: bins, dir: t.TempDir(), token: makeToken(t), replicas: 1, tally: newTally()}
	s.reportFigures(t)
	s.dbURL = o.dbURL
	if s.dbURL == "" {
		s.dbURL = pgtest.URL(t)
	}
	// Artifacts of an earlier failed run would mislead: start clean.
	_ = os.RemoveAll(s.artifactDir())
	t.Cleanup(s.saveArtifacts)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgxpool.New(ctx, s.dbURL)
	if err != nil {
		t.Fatalf("open Postgres: %v", err)
	}
	t.Cleanup(db.Close)
	s.db = db
	s.watchSlowQueries(t)

	if o.embedded {
		s.natsPort = fixedPort(t)
		g := s.newGateway(fixedPort(t), true)
		s.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", s.natsPort)
		s.mustStartGateway(g)
	} else {
		nodes := max(1, o.natsNodes)
		if nodes > 1 {
			s.replicas = nodes
		}
		s.startNATS(nodes)
		gws := make([]*gatewayProc, max(1, o.gateways))
		for i := range gws {
			gws[i] = s.newGateway(fixedPort(t), false)
		}
		// Started together, as a deploy would: the streams are created by
		// whichever comes first, and the others find them.
		var gwg sync.WaitGroup
		for _, g := range gws {
			gwg.Add(1)
			go func() {
				defer gwg.Done()
				if err := s.startGateway(g); err != nil {
					t.Error(err)
				}
			}()
		}
		gwg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	if o.balanced {
		var bs []backend
		for _, g := range s.gateways {
			bs = append(bs, backend{name: g.name, addr: fmt.Sprintf("127.0.0.1:%d", g.port)})
		}
		s.lb = startBalancer(t, bs)
	}
	var wg sync.WaitGroup
	for range o.runners {
		r := s.newRunner()
		wg.Add(1)
		go func() { defer wg.Done(); s.startRunner(t, r) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	front := "none"
	if s.lb != nil {
		front = "round robin at " + s.lb.addr()
	}
	natsDesc := "embedded in gateway-1 at " + s.natsURL
	if !o.embedded {
		natsDesc = fmt.Sprintf("%d node(s) (%s), replicas %d", len(s.nats), s.natsSummary(), s.replicas)
	}
	s.notef(t, "system up: %d gateway(s) (balancer: %s), %d runner(s), NATS %s, lease %v, maintenance %v",
		len(s.gateways), front, len(s.runners), natsDesc, o.lease, maintenanceEvery)
	return s
}

func makeToken(t testing.TB) string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   testUser,
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(6 * time.Hour)),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return tok
}

// record keeps a line for the failure summary only (for goroutines that
// must not log after their test ended).
func (s *system) record(line string) {
	s.mu.Lock()
	s.summary.WriteString(time.Now().Format("15:04:05.000 ") + line + "\n")
	s.mu.Unlock()
}

// notef logs a line and keeps it for the failure summary.
func (s *system) notef(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	s.mu.Lock()
	s.summary.WriteString(time.Now().Format("15:04:05.000 ") + line + "\n")
	s.mu.Unlock()
}

var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// fixedPort picks a free port below the ephemeral range (32768-60999 here),
// so a restarted server can bind it again: a port from :0 could meanwhile be
// taken as some connection's local end.
func fixedPort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 500 {
		p := 20000 + rand.IntN(12000)
		if ports[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		ports[p] = true
		return p
	}
	t.Fatal("no free port found in 20000-31999")
	return 0
}

// environ is this process's environment without any Tether, NATS or
// Postgres setting, plus the given ones: nothing leaks in from the shell.
func environ(settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TETHER_") || k == "DATABASE_URL" || k == "NATS_URL" || k == "TEST_DATABASE_URL" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, settings...)
}

func logLevel() string {
	if v := os.Getenv("TETHER_FAULT_LOG_LEVEL"); v != "" {
		return v
	}
	return "info"
}

// newProc makes (does not start) a process whose output goes to
// DIR/<name>.log.
func (s *system) newProc(name, bin string, args, env []string) *proc {
	s.t.Helper()
	sink, err := newLogSink(filepath.Join(s.dir, name+".log"))
	if err != nil {
		s.t.Fatalf("log file for %s: %v", name, err)
	}
	p := &proc{name: name, bin: bin, args: args, env: env, log: sink}
	p.onCrash = func(p *proc, err error) {
		s.mu.Lock()
		s.crashes = append(s.crashes, fmt.Sprintf("%s: %v", p.name, err))
		s.mu.Unlock()
		s.t.Logf("%s exited on its own: %v; last lines:\n%s", p.name, err, p.log.tail(15))
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	s.t.Cleanup(func() { p.stop(); p.log.close() })
	return p
}

func (s *system) newGateway(port int, embedded bool) *gatewayProc {
	s.t.Helper()
	n := len(s.gateways) + 1
	g := &gatewayProc{port: port, dataDir: filepath.Join(s.dir, fmt.Sprintf("gateway-%d-data", n))}
	env := []string{
		"TETHER_ADDR=127.0.0.1:" + strconv.Itoa(port),
		"DATABASE_URL=" + s.dbURL,
		"TETHER_AUTH_SECRET=" + testSecret,
		"TETHER_LEASE=" + s.opts.lease.String(),
		"TETHER_RATE=0",
		"TETHER_MAINTENANCE_INTERVAL=" + maintenanceEvery.String(),
		"TETHER_CONNECT_TIMEOUT=30s",
		"TETHER_DATA_DIR=" + g.dataDir,
		"TETHER_LOG_LEVEL=" + logLevel(),
	}
	if embedded {
		g.natsListen = fmt.Sprintf("127.0.0.1:%d", s.natsPort)
		env = append(env, "TETHER_NATS_LISTEN="+g.natsListen)
	} else {
		env = append(env, "NATS_URL="+s.natsURL, "TETHER_NATS_REPLICAS="+strconv.Itoa(s.replicas))
	}
	g.proc = s.newProc(fmt.Sprintf("gateway-%d", n), s.bins.gateway, nil, environ(env...))
	s.gateways = append(s.gateways, g)
	return g
}

func (s *system) mustStartGateway(g *gatewayProc) {
	s.t.Helper()
	if err := s.startGateway(g); err != nil {
		s.t.Fatal(err)
	}
}

// startGateway starts g (again) and waits for /readyz to answer 200.
func (s *system) startGateway(g *gatewayProc) error {
	if err := g.start(); err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	err := eventually.Within(60*time.Second, g.name+" /readyz 200", func() (bool, error) {
		if e := g.exitError(); e != nil {
			return false, fmt.Errorf("%s exited: %v", g.name, e)
		}
		resp, err := client.Get(g.base() + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, g.log.tail(20))
	}
	return nil
}

// newRunner makes the next runner (runner-1, runner-2, … also on restarts:
// a replaced runner gets a new id, as a new pod would).
func (s *system) newRunner() *runnerProc {
	s.t.Helper()
	s.nextID++
	r := &runnerProc{id: fmt.Sprintf("runner-%d", s.nextID)}
	dbURL := s.dbURL
	if s.opts.proxied {
		u, err := url.Parse(s.dbURL)
		if err != nil {
			s.t.Fatalf("parse database URL: %v", err)
		}
		r.proxy = startProxy(s.t, u.Host)
		u.Host = r.proxy.addr()
		dbURL = u.String()
	}
	r.proc = s.newProc(r.id, s.bins.runner, nil, environ(
		"DATABASE_URL="+dbURL,
		"NATS_URL="+s.natsURL,
		"TETHER_NATS_REPLICAS="+strconv.Itoa(s.replicas),
		"TETHER_RUNNER_ID="+r.id,
		"TETHER_ENGINE=demo",
		"TETHER_LEASE="+s.opts.lease.String(),
		"TETHER_MAINTENANCE_INTERVAL="+maintenanceEvery.String(),
		"TETHER_DRAIN_TIMEOUT=5s",
		"TETHER_CONNECT_TIMEOUT=30s",
		"TETHER_LOG_LEVEL="+logLevel(),
	))
	s.mu.Lock()
	s.runners = append(s.runners, r)
	s.mu.Unlock()
	return r
}

// startRunner starts r and waits for the line its main prints once it is
// connected to Postgres and NATS ("runner <id>: engine …").
func (s *system) startRunner(t testing.TB, r *runnerProc) {
	from := r.log.size()
	if err := r.start(); err != nil {
		t.Error(err)
		return
	}
	if _, err := r.log.waitFrom(from, 60*time.Second, "runner "+r.id+": engine"); err != nil {
		t.Errorf("%s not ready: %v\n%s", r.id, err, r.log.tail(20))
	}
}

// runner finds a runner by its id.
func (s *system) runner(id string) *runnerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runners {
		if r.id == id {
			return r
		}
	}
	return nil
}

// keepLogs has the process logs saved when the test ends, even if it
// passes: a figure within its bound but far from the usual one is worth a
// look in the logs, and a later run may not show it again.
func (s *system) keepLogs(t *testing.T, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	s.notef(t, "keeping the process logs: %s", why)
	s.mu.Lock()
	s.keep = append(s.keep, t.Name()+": "+why)
	s.mu.Unlock()
}

// saveArtifacts copies every process log and the summary of a failed test
// (of one that asked keepLogs, of every test with TETHER_FAULT_KEEP_LOGS
// set) to test-artifacts/faults/<test name>/ under the module root.
func (s *system) saveArtifacts() {
	s.mu.Lock()
	keep := strings.Join(s.keep, "\n")
	s.mu.Unlock()
	if !s.t.Failed() && keep == "" && os.Getenv("TETHER_FAULT_KEEP_LOGS") == "" {
		return
	}
	dst := s.artifactDir()
	_ = os.RemoveAll(dst)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		s.t.Logf("artifacts: %v", err)
		return
	}
	logs, _ := filepath.Glob(filepath.Join(s.dir, "*.log"))
	for _, src := range logs {
		b, err := os.ReadFile(src)
		if err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(src)), b, 0o644)
		}
	}
	s.mu.Lock()
	summary := s.summary.String()
	crashes := strings.Join(s.crashes, "\n")
	s.mu.Unlock()
	_ = os.WriteFile(filepath.Join(dst, "summary.txt"),
		[]byte(summary+"\ncrashes:\n"+crashes+"\nkept because:\n"+keep+"\n"), 0o644)
	s.t.Logf("process logs and summary saved in %s", dst)
}

// artifactDir is where a failed test's logs go:
// test-artifacts/faults/<test name> under the module root.
func (s *system) artifactDir() string {
	return filepath.Join(s.bins.root, "test-artifacts", "faults", strings.ReplaceAll(s.t.Name(), "/", "_"))
}
