package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/engine"
	"github.com/tether-dev/tether/internal/engine/enginetest"
	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/gateway/natsgateway"
	"github.com/tether-dev/tether/internal/maintenance"
	"github.com/tether-dev/tether/internal/natsbus"
	"github.com/tether-dev/tether/internal/natsbus/natstest"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/runner"
	"github.com/tether-dev/tether/internal/runner/natsrunner"
	"github.com/tether-dev/tether/internal/syncbuffer"
)

// privateCluster starts a Postgres cluster of its own with scripts/pg.sh
// (the test stops and starts it) and returns its URL and a function that
// runs pg.sh start or stop on it.
func privateCluster(t *testing.T) (string, func(cmd string)) {
	t.Helper()
	script, err := filepath.Abs("../../scripts/pg.sh")
	if err != nil {
		t.Fatal(err)
	}
	// Under /var/tmp or TMPDIR, with modes the postgres user can pass when
	// the test runs as root (t.TempDir is mode 700).
	dir, err := os.MkdirTemp(os.Getenv("TMPDIR"), "tether-outage-pg.")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pg := func(cmd string) {
		t.Helper()
		out, err := exec.Command(script, cmd, dir, "fast").CombinedOutput()
		if err != nil {
			t.Fatalf("pg.sh %s: %v\n%s", cmd, err, out)
		}
	}
	out, err := exec.Command(script, "start", dir, "fast").Output()
	if err != nil {
		t.Fatalf("pg.sh start: %v", err)
	}
	t.Cleanup(func() {
		_ = exec.Command(script, "stop", dir).Run()
		_ = os.RemoveAll(dir)
	})
	return strings.TrimSpace(string(out)), pg
}

// TestPostgresRestart restarts the real Postgres under a running system
// (gateway, runner, maintenance) for 3 seconds while three answers stream
// and clients keep asking. Every failed request answers `unavailable` (HTTP
// 503, never 500), /readyz says Postgres is down, the system recovers by
// itself, and no running answer gets a new attempt: each ends done on
// attempt 1 with its exact text.
func TestPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a Postgres cluster")
	}
	t.Parallel()
	dbURL, pg := privateCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	store, err := postgres.Open(ctx, dbURL, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	bus, err := natsbus.Connect(ctx, natstest.Start(t), natsbus.Config{Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	eng, _ := engine.New("demo")
	var logs syncbuffer.Buffer
	r, err := runner.New(runner.Config{Engine: eng, Logger: jsonLogger(&logs)}, store, natsrunner.New(bus))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	loop := &maintenance.Loop{Store: store, Bus: bus, Logger: jsonLogger(&logs)}
	go func() { defer wg.Done(); _ = loop.Run(ctx) }()
	defer wg.Wait()
	defer cancel()

	secret := []byte(testSecret)
	gw, err := gateway.New(gateway.Config{AuthSecret: secret, Logger: jsonLogger(&logs), Ready: store.Ping},
		store, natsgateway.New(bus))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	e := &env{t: t, srv: srv, secret: secret}

	// Three answers of 8 s each, streaming.
	const n = 400
	var ids []string
	for range 3 {
		id := newID()
		code, body := e.httpDo("POST", "/v1/tasks", "alice",
			map[string]string{"task_id": id, "conversation_id": newID(), "content": fmt.Sprintf("/stream %d 20", n)})
		if code != http.StatusCreated {
			t.Fatalf("submit: %d %v", code, body)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		eventually.True(t, "answers streaming", func() bool {
			_, body := e.httpDo("GET", "/v1/tasks/"+id, "alice", nil)
			out, _ := body["output"].(string)
			return body["status"] == "running" && len(out) > 20
		})
	}

	// Clients keep asking while Postgres is away: reads, submits, readiness.
	var (
		mu    sync.Mutex
		codes = map[string]int{}
		ready []string
	)
	ask := func(method, path string, body any) (int, string) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+e.token("alice", time.Hour))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "transport: " + err.Error()
		}
		defer resp.Body.Close()
		var out struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out.Error.Code
	}
	stopAsking := make(chan struct{})
	var askers sync.WaitGroup
	for i := range 4 {
		askers.Add(1)
		go func() {
			defer askers.Done()
			for k := 0; ; k++ {
				select {
				case <-stopAsking:
					return
				case <-time.After(50 * time.Millisecond):
				}
				var status int
				var code string
				switch (i + k) % 3 {
				case 0:
					status, code = ask("GET", "/v1/tasks/"+ids[k%3], nil)
				case 1:
					status, code = ask("POST", "/v1/tasks", map[string]string{"task_id": newID(),
						"conversation_id": newID(), "content": "hello"})
				default:
					status, code = ask("GET", "/v1/conversations", nil)
				}
				if status < 300 {
					continue
				}
				mu.Lock()
				codes[fmt.Sprintf("%d %s", status, code)]++
				mu.Unlock()
			}
		}()
	}

	pg("stop")
	down := time.Now()
	// /readyz names the dependency that is down, and no more: why is for
	// the log, not for anyone who can reach the endpoint.
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rz map[string]string
	_ = json.Unmarshal(b, &rz)
	if resp.StatusCode != http.StatusServiceUnavailable || rz["nats"] != "ok" || rz["postgres"] != "down" {
		t.Errorf("/readyz while Postgres is down: %d %s", resp.StatusCode, b)
	}
	ready = append(ready, string(b))
	time.Sleep(3*time.Second - time.Since(down))
	pg("start")
	back := time.Now()
	outage := back.Sub(down)
	// Recovered: a read answers again (the pool reconnects by itself).
	var recovered time.Duration
	eventually.True(t, "a successful read after Postgres came back", func() bool {
		status, _ := ask("GET", "/v1/tasks/"+ids[0], nil)
		recovered = time.Since(back)
		return status == http.StatusOK
	})
	close(stopAsking)
	askers.Wait()

	var seen []string
	total := 0
	for c, k := range codes {
		seen = append(seen, fmt.Sprintf("%s: %d", c, k))
		total += k
	}
	sort.Strings(seen)
	t.Logf("Postgres down %.1fs: %d failed requests by code: %v; reads answered again %.2fs after it was back",
		outage.Seconds(), total, seen, recovered.Seconds())
	if total == 0 {
		t.Error("no request failed during the outage: the test did not see it")
	}
	for c := range codes {
		if c != "503 unavailable" {
			t.Errorf("a request failed with %q during the outage; want only 503 unavailable (all: %v)", c, seen)
		}
	}

	// Every answer ends exactly, on its first attempt.
	for _, id := range ids {
		eventually.True(t, "answers done", func() bool {
			_, body := e.httpDo("GET", "/v1/tasks/"+id, "alice", nil)
			return body["status"] == "done" || body["status"] == "failed"
		})
		_, body := e.httpDo("GET", "/v1/tasks/"+id, "alice", nil)
		if body["status"] != "done" || body["attempt"] != float64(1) || body["output"] != enginetest.StreamText(n) {
			t.Errorf("task %s after the outage: status %v attempt %v, output exact: %v", id, body["status"],
				body["attempt"], body["output"] == enginetest.StreamText(n))
		}
	}
	if s := logs.String(); strings.Contains(s, "lease") && strings.Contains(s, "going quiet") {
		t.Errorf("a runner went quiet during a 3s outage with a 15s lease:\n%s", s)
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}

func jsonLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
