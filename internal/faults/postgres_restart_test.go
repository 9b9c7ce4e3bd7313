package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/eventually"
)

// pgDown is how long Postgres stays stopped in TestPostgresRestart: a
// restart of a few seconds, as a minor version upgrade or a failover
// would be. Well under the lease below, so no attempt may be lost to it.
const pgDown = 3 * time.Second

// TestPostgresRestart: the cluster form on a Postgres cluster of its own
// (scripts/pg.sh, in a temporary directory), stopped with pg_ctl -m fast
// mid-answer and started again 3 s later, while four HTTP clients keep
// asking through the balancer (reads, submits, conversation lists) every
// 50 ms. Every failed request must answer 503 `unavailable`, nothing else;
// the system recovers by itself; the answer stays on attempt 1 and ends
// exact everywhere. Reported: how long the restart took, the seconds from
// Postgres accepting connections again to the first successful request,
// and every error seen.
func TestPostgresRestart(t *testing.T) {
	slowScenario(t, "stops and starts a Postgres cluster")
	dbURL, pg := privatePostgres(t)
	o := cluster.opts(10 * time.Second)
	o.dbURL = dbURL
	s := newSystem(t, o)
	for i := 1; i <= trials(t, 1); i++ {
		s.tally.trial()
		t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) { pgRestartTrial(t, s, pg) })
	}
}

// privatePostgres starts a Postgres cluster of the test's own with
// scripts/pg.sh (fsync off, as the test servers are) and returns its URL
// and a function running pg.sh start or stop on it. The cluster is
// stopped and removed when the test ends.
func privatePostgres(t *testing.T) (string, func(cmd string) error) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "pg.sh")
	// Not t.TempDir (mode 700): when the test runs as root the cluster runs
	// as the postgres user, who must be able to reach the directory.
	dir, err := os.MkdirTemp(os.Getenv("TMPDIR"), "tether-faults-pg.")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pg := func(cmd string) error {
		out, err := exec.Command(script, cmd, dir, "fast").CombinedOutput()
		if err != nil {
			return fmt.Errorf("pg.sh %s: %v\n%s", cmd, err, out)
		}
		return nil
	}
	out, err := exec.Command(script, "start", dir, "fast").Output()
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("pg.sh start: %v", err)
	}
	t.Cleanup(func() {
		_ = exec.Command(script, "stop", dir).Run()
		_ = os.RemoveAll(dir)
	})
	return strings.TrimSpace(string(out)), pg
}

// asker is one HTTP client asking the system through the balancer, like a
// browser's page would, and noting every answer that is not a success.
type asker struct {
	s      *system
	client *http.Client

	mu       sync.Mutex
	failures map[string]int // "503 unavailable", "transport: …"
	lastOK   time.Time
	ok       int
}

func (k *asker) do(method, path string, body any) (int, string) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+k.s.lb.addr()+path, rd)
	req.Header.Set("Authorization", "Bearer "+k.s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return 0, "transport error"
	}
	defer resp.Body.Close()
	var out struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Error.Code
}

// ask sends one of three requests, by turn, and notes the outcome.
func (k *asker) ask(turn int, taskID string) {
	var status int
	var code string
	switch turn % 3 {
	case 0:
		status, code = k.do("GET", "/v1/tasks/"+taskID, nil)
	case 1:
		// A one-token answer: the submits must not load the runners.
		status, code = k.do("POST", "/v1/tasks", map[string]string{"task_id": uuid.NewString(),
			"conversation_id": uuid.NewString(), "content": "/stream 1 0"})
	default:
		status, code = k.do("GET", "/v1/conversations", nil)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if status >= 200 && status < 300 {
		k.ok++
		k.lastOK = time.Now()
		return
	}
	key := code
	if status != 0 {
		key = fmt.Sprintf("%d %s", status, code)
	}
	k.failures[key]++
}

func pgRestartTrial(t *testing.T, s *system, pg func(string) error) {
	a := s.submit(t, 3, 600, 20)
	s.holder(t, a.taskID)
	a.waitTokens(t, 100, 30*time.Second)

	k := &asker{s: s, client: &http.Client{Timeout: 10 * time.Second}, failures: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond) // the clients' pace
			defer tick.Stop()
			for turn := i; ; turn++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				k.ask(turn, a.taskID)
			}
		}()
	}
	stopAskers := func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}
	defer stopAskers()

	stopAt := time.Now()
	if err := pg("stop"); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	s.notef(t, "Postgres stopped (pg_ctl -m fast took %v)", stopped.Sub(stopAt).Round(time.Millisecond))
	// The outage is the scenario itself. A timer, not a synchronisation.
	timer := time.NewTimer(pgDown)
	<-timer.C
	startAt := time.Now()
	if err := pg("start"); err != nil {
		t.Fatal(err)
	}
	started := time.Now()

	// The first success after Postgres accepts connections again: a read,
	// polled every 10 ms (the poll is the measurement's resolution).
	probe := &asker{s: s, client: &http.Client{Timeout: 10 * time.Second}, failures: map[string]int{}}
	deadline := time.Now().Add(30 * time.Second)
	var firstOK time.Duration
	for {
		if status, _ := probe.do("GET", "/v1/tasks/"+a.taskID, nil); status == http.StatusOK {
			firstOK = time.Since(started)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful read within 30 s of Postgres starting again")
		}
		poll := time.NewTimer(10 * time.Millisecond) // the poll interval
		<-poll.C
	}
	// Every asker has answered after the restart: each of its kinds of
	// request succeeds again (observed, then stop).
	if err := eventually.Within(30*time.Second, "the clients' requests succeeding again", func() (bool, error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.lastOK.After(started), nil
	}); err != nil {
		t.Error(err)
	}
	stopAskers()

	down := started.Sub(stopAt)
	s.notef(t, "Postgres down %v (stop %v, kept stopped %v, pg_ctl start -w %v); first successful read %v after pg_ctl start returned",
		down.Round(time.Millisecond), stopped.Sub(stopAt).Round(time.Millisecond), startAt.Sub(stopped).Round(time.Millisecond),
		started.Sub(startAt).Round(time.Millisecond), firstOK.Round(time.Millisecond))
	s.tally.time("Postgres down (stop begun to pg_ctl start returned)", down)
	s.tally.time("Postgres accepting connections (pg_ctl start returned) to the first successful request", firstOK)
	s.tally.time("Postgres start begun to the first successful request", started.Sub(startAt)+firstOK)
	k.mu.Lock()
	total := 0
	for code, n := range k.failures {
		s.tally.count("HTTP requests that failed, by answer", code, n)
		total += n
		if code != "503 unavailable" {
			t.Errorf("a request answered %q during the restart (%d times); want only 503 unavailable", code, n)
		}
	}
	s.notef(t, "requests: %d succeeded, %d failed: %v", k.ok, total, k.failures)
	k.mu.Unlock()
	if total == 0 {
		t.Error("no request failed while Postgres was down: the test did not see the outage")
	}

	if !a.waitDone(t, 60*time.Second) {
		s.probe(t, a)
	}
	s.verify(t, a, expect{attempt: 1})
	for _, tb := range a.tabs {
		tb.mu.Lock()
		for _, e := range tb.errs {
			// "15:04:05.000 code: message (req …)"
			f := strings.Fields(e)
			if len(f) > 1 {
				s.tally.count("WebSocket error replies to the tabs", strings.TrimSuffix(f[1], ":"), 1)
			}
		}
		tb.mu.Unlock()
	}
	reportPauses(t, s, a, stopAt, started, "Postgres stopped", "Postgres started")
}
