package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a program the bench started: the gateway, the runner or the raw
// baseline server. It is ended by its own PID (SIGTERM, then SIGKILL), never
// by name.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	// addrs are what the program announced: "http", "nats", "pprof".
	mu    sync.Mutex
	addrs map[string]string
	ready chan struct{}
	done  chan struct{}
	err   error
}

// startProc runs path with args and env (added to a minimal environment),
// logging to dir/name.log, and waits until it announced every address in
// want (read from its stdout and its JSON log lines).
func startProc(ctx context.Context, dir, name, path string, args, env []string, want ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	if g := os.Getenv("TETHER_BENCH_GODEBUG"); g != "" {
		cmd.Env = append(cmd.Env, "GODEBUG="+g)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: logf, addrs: map[string]string{}, ready: make(chan struct{}), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.scan(stdout, want) }()
	go func() { defer wg.Done(); p.scan(stderr, want) }()
	go func() {
		wg.Wait()
		p.err = cmd.Wait()
		close(p.done)
	}()
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	select {
	case <-p.ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited at start (%v); see %s", name, p.err, logf.Name())
	case <-wait.Done():
		p.stop()
		return nil, fmt.Errorf("%s did not announce %v in time; see %s", name, want, logf.Name())
	}
}

// scan copies the program's output to its log and picks up the addresses it
// announces.
func (p *proc) scan(r io.Reader, want []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		fmt.Fprintln(p.log, line)
		p.mu.Unlock()
		key, addr := announced(line)
		if key == "" {
			continue
		}
		p.mu.Lock()
		p.addrs[key] = addr
		complete := true
		for _, w := range want {
			if p.addrs[w] == "" {
				complete = false
			}
		}
		if complete {
			select {
			case <-p.ready:
			default:
				close(p.ready)
			}
		}
		p.mu.Unlock()
	}
}

// announced recognises the lines where the programs say where they listen.
func announced(line string) (key, addr string) {
	if i := strings.Index(line, "Listening for client connections on "); i >= 0 {
		return "nats", "nats://" + strings.TrimSpace(line[i+len("Listening for client connections on "):])
	}
	if i := strings.Index(line, "listening on http://"); i >= 0 && !strings.HasPrefix(line, "{") {
		return "http", strings.TrimSpace(line[i+len("listening on http://"):])
	}
	if !strings.HasPrefix(line, "{") {
		return "", ""
	}
	var rec struct {
		Msg  string `json:"msg"`
		URL  string `json:"url"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &rec) != nil {
		return "", ""
	}
	switch rec.Msg {
	case "embedded NATS started":
		return "nats", rec.URL
	case "pprof listening":
		return "pprof", rec.Addr
	}
	return "", ""
}

func (p *proc) addr(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addrs[key]
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop ends the program by its PID: SIGTERM, then SIGKILL after 15 s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
}

// cpuTime is the CPU (user + system) the process has used, from /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// postgresCPU is the CPU all of this machine's postgres processes have
// used (the server's backends, its writer and WAL writer).
func postgresCPU() time.Duration {
	var total time.Duration
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if c, err := cpuTime(pid); err == nil {
			total += c
		}
	}
	return total
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// rss is the process's resident set in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// goroutines asks a pprof endpoint how many goroutines the process runs.
func goroutines(pprofAddr string) (int, error) {
	resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, err
	}
	// "goroutine profile: total 123"
	n, err := strconv.Atoi(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]))
	if err != nil {
		return 0, fmt.Errorf("goroutine count in %q: %w", line, err)
	}
	return n, nil
}

// profile saves a CPU profile of seconds from a pprof endpoint to path.
func profile(pprofAddr string, seconds int, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, seconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// startProfile starts a CPU profile of seconds from pprofAddr into path (""
// for none); the returned func waits for it to be saved.
func startProfile(pprofAddr, path string, seconds int) (wait func()) {
	if path == "" || pprofAddr == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := profile(pprofAddr, seconds, path); err != nil {
			fmt.Fprintln(os.Stderr, "bench: profile:", err)
		}
	}()
	// Let the profiler start before the work does.
	time.Sleep(50 * time.Millisecond)
	return func() { <-done }
}
