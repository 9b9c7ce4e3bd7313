package postgres_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// TestSubmitBatchSurvivesPostgresKilled kills every process of a Postgres
// cluster (SIGKILL, as a crash or the OOM killer would) while a batch of
// submits is in the middle of its statement and other submits go on beside
// it, then starts it again (crash recovery). Every submit that was answered
// exists exactly once with its two messages and its transition; every one
// that got an error, submitted again, yields exactly one task.
func TestSubmitBatchSurvivesPostgresKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Postgres cluster of its own")
	}
	pg := ownPostgres(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, pg.url+"&pool_max_conns=8", postgres.Config{LockTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// The batch will stop at a row held by another transaction: it has
	// written its tasks, not its conversations, and not committed.
	held := newID()
	submit(t, s, "alice", newID(), held, "first")
	blocker, err := pgx.Connect(ctx, pg.url)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	lock, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE`, held); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var answered []task.SubmitRequest
	var failed []task.SubmitRequest
	record := func(req task.SubmitRequest, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = append(failed, req)
		} else {
			answered = append(answered, req)
		}
	}
	var wg sync.WaitGroup
	release := s.HoldBatches()
	batch := []task.SubmitRequest{{UserID: "alice", TaskID: newID(), ConversationID: held, Content: "second"}}
	for range 15 {
		batch = append(batch, task.SubmitRequest{UserID: "alice", TaskID: newID(), ConversationID: newID(), Content: "batched"})
	}
	batchErrs := make([]error, len(batch))
	for i, req := range batch {
		wg.Go(func() {
			_, err := s.Submit(ctx, req)
			batchErrs[i] = err
			record(req, err)
		})
	}
	eventually.True(t, "the batch queued", func() bool { return s.QueuedSubmits() == len(batch) })
	release()
	eventually.True(t, "the batch waits for the held row", func() bool {
		return count(t, s, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%unnest(%'`) == 1
	})

	// Clients submitting beside it, each until its first error.
	for range 4 {
		wg.Go(func() {
			for {
				req := task.SubmitRequest{UserID: "bob", TaskID: newID(), ConversationID: newID(), Content: "beside"}
				_, err := s.Submit(ctx, req)
				record(req, err)
				if err != nil {
					return
				}
			}
		})
	}
	eventually.True(t, "submits beside the batch answered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answered) >= 20
	})

	pg.kill(t)
	wg.Wait()
	for i, err := range batchErrs {
		if err == nil {
			t.Fatalf("submit %d of the batch held by a lock was answered", i)
		}
		wantCode(t, err, task.CodeUnavailable)
	}

	// Every answered submit is there once, with its messages and its transition.
	ids := func(reqs []task.SubmitRequest) []string {
		out := make([]string, len(reqs))
		for i, r := range reqs {
			out[i] = r.TaskID
		}
		return out
	}
	before := pg.url
	pg.start(t)
	if pg.url != before {
		t.Fatalf("the cluster came back at %s, not %s", pg.url, before)
	}
	eventually.True(t, "the store reconnects", func() bool { return s.Ping(ctx) == nil })
	a := ids(answered)
	if n := count(t, s, `SELECT count(*) FROM tasks WHERE id = ANY($1::uuid[])`, a); n != len(a) {
		t.Fatalf("%d of %d answered submits have their task", n, len(a))
	}
	if n := count(t, s, `SELECT count(*) FROM messages WHERE task_id = ANY($1::uuid[])`, a); n != 2*len(a) {
		t.Fatalf("%d messages for %d answered submits", n, len(a))
	}
	if n := count(t, s, `SELECT count(*) FROM task_transitions WHERE task_id = ANY($1::uuid[])`, a); n != len(a) {
		t.Fatalf("%d transitions for %d answered submits", n, len(a))
	}
	// Every failed one, submitted again, is one task.
	for _, req := range failed {
		res, err := s.Submit(ctx, req)
		if err != nil {
			t.Fatalf("submit %s again: %v", req.TaskID, err)
		}
		if res.Task.ID != req.TaskID {
			t.Fatalf("submit %s again answered %s", req.TaskID, res.Task.ID)
		}
	}
	f := ids(failed)
	if n := count(t, s, `SELECT count(*) FROM messages WHERE task_id = ANY($1::uuid[])`, f); n != 2*len(f) {
		t.Fatalf("%d messages for %d submits made again", n, len(f))
	}
	total := count(t, s, `SELECT count(*) FROM tasks`)
	if want := 1 + len(a) + len(f); total != want {
		t.Fatalf("%d tasks, want %d", total, want)
	}
	if got := rowCounts(t, s); got[1] != 2*total || got[3] != total {
		t.Fatalf("rows (conversations, messages, tasks, transitions) = %v for %d tasks", got, total)
	}
	t.Logf("%d answered before the kill, %d failed and submitted again", len(a), len(f))
}

// privateCluster is a Postgres cluster of one test's own, started with
// scripts/pg.sh with fsync and synchronous commit on (a commit answered is
// on disk, as on a real server).
type privateCluster struct {
	script, dir, url string
}

func ownPostgres(t *testing.T) *privateCluster {
	t.Helper()
	if !havePostgresBinaries() {
		t.Skip("no Postgres server binaries (pg_ctl) on this machine")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "pg.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir (mode 700): as root the cluster runs as the postgres
	// user, who must reach the directory.
	dir, err := os.MkdirTemp(os.Getenv("TMPDIR"), "tether-pg-crash.")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &privateCluster{script: script, dir: dir}
	t.Cleanup(func() {
		_ = exec.Command(script, "stop", dir).Run()
		_ = os.RemoveAll(dir)
	})
	c.start(t)
	return c
}

func havePostgresBinaries() bool {
	if _, err := exec.LookPath("pg_ctl"); err == nil {
		return true
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	return len(found) > 0
}

func (c *privateCluster) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(c.script, "start", c.dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		t.Fatalf("pg.sh start: %v\n%s\nserver.log:\n%s", err, stderr.String(), log)
	}
	c.url = strings.TrimSpace(string(out))
}

// kill sends SIGKILL to the postmaster and every process it started, and
// waits until they are gone (reaped).
func (c *privateCluster) kill(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	// Stopped first, the postmaster starts no backend between the listing
	// of its children and the kill (one left running would hold the shared
	// memory, and the cluster would not start again).
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop the postmaster %d: %v", pm, err)
	}
	pids := append([]int{pm}, children(t, pm)...)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
	eventually.True(t, "every Postgres process gone", func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

// children lists the processes whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(child); ok && ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// procStat reads the fields of /proc/PID/stat after the command's name.
func procStat(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

func parentOf(pid int) (int, bool) {
	f, ok := procStat(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// alive: the process exists, even as a zombie not yet reaped (pg_ctl and
// a starting postmaster would take it for the server still running).
func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
